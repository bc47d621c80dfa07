"""A scheduled retraining pipeline: prepare data -> train (PyTorchTrainingJob) -> evaluate ->
promote the model only if its metric beats the one in production.

The training job's result comes back through XCom: ``train.py`` writes ``{"metric": ...}``
to ``/dev/termination-log`` in rank 0, the operator returns it as ``result``, and "evaluate"
reads it from there. Two DAGs share the pipeline:

- ``retraining_pipeline`` (``make demo``): on the local kwok nodes the pods run no code, so a
  simulation annotation makes rank 0 end with the message ``train.py`` would write (the run's
  ``candidate_metric`` param); drop it on a real cluster.
- ``retraining_pipeline_real`` (``make demo-real``): two replicas train for real on the local
  cluster's real node (``jobs/train_ddp.py``, DDP over gloo, mounted from the ConfigMap
  ``retraining-code``), and the metric that comes back is the measured accuracy.

Both are asset-aware: "prepare_data" updates the data asset ``CLICKS``, which "train" reads
(``inlets``), and "train" updates the candidate asset ``CANDIDATE`` (``outlets``) with an asset
event whose extra is the job's result (the metric, the model version's URI) and the job. Only
"promote" updates the production asset ``MODEL``, and only when the candidate beats the champion:
downstream DAGs scheduled on ``MODEL`` see promotions, never a training that lost.

Promotion cannot race: "promote" is ``PromoteOperator`` (docs/retraining.md). The champion (its
metric, model URI, run) is kept in Airflow 3.3's asset state store on ``MODEL``, read and written
with at most one instance of "promote" running at a time across all runs
(``max_active_tis_per_dag=1``): two runs finishing together cannot both win, the second compares
with the first's result. A candidate that loses skips "promote" (``MODEL`` gets no event); the
decision, who beat whom and by how much, is its XCom ``promotion`` either way. The DAG runs one at
a time (``max_active_runs=1``), and a backfill never promotes: an old week's model is not
compared with today's champion.

A third DAG, ``retraining_evaluation``, is scheduled on ``CANDIDATE``: each successful training runs
it with that event, and it reads the metric from the event, not from XCom. Trainings that end
together may share one run: it evaluates every model among its events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Asset, task

from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator
from airflow_t9k.operators.promote import PromoteOperator

CLICKS = Asset("s3://ml-data/clicks")  # the training data, updated by prepare_data
CANDIDATE = Asset("s3://models/clicks-ranker/candidates")  # every model a training made
MODEL = Asset("s3://models/clicks-ranker")  # the production model: updated only by a promotion
CHAMPION = "champion"  # MODEL's asset state: the production model's metric, URI and run

REAL_NODE = {  # where the local cluster's real node takes jobs (scripts/local-cluster.sh up --real-node)
    "image": "localhost/airflow-t9k/train:1",
    "tolerations": [{"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"}],
    "node_selector": {"t9k.test/real": "true"},
}


def training(real: bool) -> PyTorchTrainingJobOperator:
    data = "{{ ti.xcom_pull(task_ids='prepare_data')['dataset'] }}"
    common = {"task_id": "train", "replicas": 2, "timeout": 1800, "deferrable": True, "inlets": [CLICKS], "outlets": [CANDIDATE],
              "spec": {"runPolicy": {"backoffLimit": 2, "cleanUpPolicy": "Unfinished"}}}  # fmt: skip
    if real:
        return PyTorchTrainingJobOperator(
            command=["python3", "/code/train_ddp.py", "--data", data],
            container_resources={"limits": {"cpu": "500m", "memory": "1Gi"}},
            volumes=[{"name": "code", "configMap": {"name": "retraining-code"}}],
            volume_mounts=[{"name": "code", "mountPath": "/code"}],
            **REAL_NODE,
            **common,
        )
    return PyTorchTrainingJobOperator(
        image="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        command=["python", "train.py", "--data", data],
        machine_type="4U16G1P",
        # kwok only (inert on a real cluster, drop them): how long the simulated replicas run, and
        # the termination message they end with, as train.py would write it.
        pod_annotations={"sim.t9k.test/duration": "15s",
                         "sim.t9k.test/message": '{"metric": {{ params.candidate_metric }}, '
                                                 '"model_uri": "s3://models/clicks-ranker/{{ run_id }}"}'},
        **common,
    )  # fmt: skip


def pipeline(dag_id: str, real: bool) -> None:
    with DAG(
        dag_id,
        start_date=datetime(2026, 1, 1),
        schedule="@weekly",
        catchup=False,
        max_active_runs=1,  # a week's training waits for the last one: no two candidates race
        params={"candidate_metric": 0.91, "train_seconds": "5s"},
        tags=["t9k", "retraining"] + (["real-node"] if real else []),
    ):

        @task(outlets=[CLICKS])
        def prepare_data(ds: str | None = None) -> dict[str, Any]:
            return {"dataset": f"s3://ml-data/clicks/{ds}", "rows": 1_000_000}

        data = prepare_data()

        train = training(real)

        @task
        def evaluate(job: dict[str, Any]) -> float:
            if job.get("phase") != "Succeeded":
                raise ValueError(f"training did not succeed: {job}")
            metric = float(job["result"]["metric"])
            print(f"metric from the training job: {metric:.4f}")
            return metric

        # Decides under mutual exclusion (one instance at a time, whatever the run): reads the
        # champion, compares, writes the winner, and only then the production asset's event; a
        # candidate that loses skips it (operators/promote.py).
        promote = PromoteOperator(task_id="promote", asset=MODEL, metric="metric", candidate_task_id="train",
                                  state_key=CHAMPION)  # fmt: skip

        data >> train
        evaluate(train.output) >> promote


pipeline("retraining_pipeline", real=False)
pipeline("retraining_pipeline_real", real=True)

# Scheduled on the candidate asset: runs after each training that succeeded, with its asset event.
with DAG(
    "retraining_evaluation",
    start_date=datetime(2026, 1, 1),
    schedule=[CANDIDATE],
    catchup=False,
    tags=["t9k", "retraining", "assets"],
):

    @task
    def evaluate_model(triggering_asset_events: Any = None) -> list[dict[str, Any]]:
        # Trainings that end close together are one run's events (Airflow queues them until the
        # scheduler makes the run): evaluate every model, not only the newest. Airflow 3.3 can
        # still drop an event that lands while the scheduler makes that run (within tens of ms);
        # tests/integration/test_e2e_assets.py keeps its trainings apart for that reason.
        models = []
        for event in triggering_asset_events[CANDIDATE]:
            extra = event.extra  # the training job's result, and the job
            job = extra.get("t9k_job") or {}
            print(
                f"model {extra.get('model_uri', CANDIDATE.uri)} from {job.get('kind')} {job.get('namespace')}/{job.get('name')} "
                f"(run {event.source_run_id}): metric {extra.get('metric')}"
            )
            models.append({"metric": extra.get("metric"), "model_uri": extra.get("model_uri"), "job": job.get("name")})
        return models

    evaluate_model()
