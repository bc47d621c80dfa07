"""DAGs for the asset test with a real scheduler: a training task whose outlets carry its job's
result, and DAGs scheduled on the asset and on the alias the result's URI is added through."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Asset, AssetAlias, task

from airflow_t9k.operators.kinds import GenericJobOperator

START = datetime(2026, 1, 1)
MODEL = Asset("s3://t9k-e2e/models/churn")
MODELS = AssetAlias("t9k-e2e-churn-models")

with DAG("t9k_asset_train", start_date=START, schedule=None, catchup=False, params={"metric": 0.5}):
    GenericJobOperator(
        task_id="train", image="busybox", replicas=1, deferrable=True,
        inlets=[Asset("s3://t9k-e2e/data/clicks")], outlets=[MODEL, MODELS], asset_from_result="model_uri",
        # kwok: the replica ends with this termination message, as train.py would write it. It runs
        # 20 s: a trigger firing within seconds of the deferral can resume the task before the
        # scheduler has read the deferral, and the scheduler then fails the resumed task (Airflow's
        # race, see e2e_dags/t9k_e2e.py; seen here once with 3 s).
        pod_annotations={"sim.t9k.test/duration": "20s",
                         "sim.t9k.test/message": '{"metric": {{ params.metric }}, '
                                                 '"model_uri": "s3://t9k-e2e/models/churn/{{ run_id }}"}'},
    )  # fmt: skip


with DAG("t9k_lineage_opt_out", start_date=START, schedule=None, catchup=False):
    # The opt-out from the OpenLineage parent in the replicas' environment (docs/airflow.md).
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True, openlineage_inject_parent_job_info=False,
                       pod_annotations={"sim.t9k.test/duration": "2s"})  # fmt: skip


def _seen(events: Any, key: Any) -> dict[str, Any]:
    [event] = events[key]
    return {"metric": event.extra["metric"], "job": event.extra["t9k_job"]["name"], "uri": event.asset.uri,
            "source_run_id": event.source_run_id}  # fmt: skip


with DAG("t9k_asset_evaluate", start_date=START, schedule=[MODEL], catchup=False):

    @task
    def evaluate(triggering_asset_events: Any = None) -> dict[str, Any]:
        return _seen(triggering_asset_events, MODEL)

    evaluate()

with DAG("t9k_asset_evaluate_alias", start_date=START, schedule=[MODELS], catchup=False):

    @task
    def evaluate_version(triggering_asset_events: Any = None) -> dict[str, Any]:
        return _seen(triggering_asset_events, MODELS)

    evaluate_version()
