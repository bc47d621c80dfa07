"""Assets with a real Airflow (api-server, scheduler, dag-processor, triggerer on SQLite), the
bundled controller and the local cluster: a training task's job ends with a termination message
(kwok's ``sim.t9k.test/message``), and the DAGs scheduled on its asset, and on the alias the
result's ``model_uri`` is added through, run with the real metric in the asset event's extra; and
the OpenLineage provider's listener reports the task's lineage with the operator's facets."""

from __future__ import annotations

import json
import shutil
import urllib.error
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.support.airflow import AirflowStack
from tests.support.cluster import wait_until
from tests.support.controller import ControllerProcess

DAGS = Path(__file__).parent / "e2e_asset_dags"
EXAMPLES = Path(__file__).resolve().parents[2] / "dags_examples"
CONSUMERS = ("t9k_asset_evaluate", "t9k_asset_evaluate_alias")


@pytest.fixture(scope="module")
def stack(cluster, api_client, crds, tmp_path_factory) -> Iterator[tuple[AirflowStack, str]]:
    core = client.CoreV1Api(api_client)
    ns = f"t9k-assets-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_until(lambda: bool(core.list_namespaced_service_account(ns).items), what="default serviceaccount")
    home = tmp_path_factory.mktemp("airflow-assets")
    dags = home / "dags"  # the test DAGs, and the retraining example (asset-driven)
    dags.mkdir()
    shutil.copy(DAGS / "t9k_assets.py", dags)
    shutil.copy(EXAMPLES / "retraining_pipeline.py", dags)
    controller = ControllerProcess(cluster.kubeconfig, ns, home).start()
    # OpenLineage (the provider is in the test extra) writes its events to a file.
    lineage = {"type": "file", "log_file_path": str(home / "lineage.jsonl"), "append": True}
    airflow = AirflowStack(home, cluster.kubeconfig, ns, dags=dags, env={"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(lineage)})
    try:
        airflow.start()
        yield airflow, ns
    finally:
        airflow.stop()
        controller.stop()
        core.delete_namespace(ns)


def _errors(stack: AirflowStack, dag_id: str, run_id: str) -> str:
    """The error lines of a run's task logs (JSON lines), for an assertion's message."""
    lines = []
    for line in stack.task_log(dag_id, run_id).splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("level") in ("error", "critical") or "error_detail" in entry:
            lines.append(json.dumps({k: entry.get(k) for k in ("event", "error_detail")})[:4000])
    return "\n".join(lines)


def _runs(stack: AirflowStack, dag_id: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in stack._query("select run_id, state from dag_run where dag_id = ? order by id", dag_id)]


def _ended(stack: AirflowStack, dag_id: str) -> list[str]:
    """The states of the DAG's runs that have ended."""
    return [state for _, state in _runs(stack, dag_id) if state in ("success", "failed")]


def _returned(stack: AirflowStack, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> dict:
    xcom = stack.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}")
    return json.loads(xcom["value"]) if isinstance(xcom["value"], str) else xcom["value"]


def test_a_dag_scheduled_on_the_model_asset_runs_with_the_jobs_metric(stack, api_client):
    airflow, ns = stack
    for dag_id in CONSUMERS:  # paused at creation, as every DAG: switch the consumers on
        wait_until(lambda d=dag_id: airflow._dag_known(d), timeout=90, interval=1, what=f"{dag_id} parsed")
        airflow._retry_locked(lambda d=dag_id: airflow.api("PATCH", f"dags/{d}", {"is_paused": False}))
    assert all(_runs(airflow, d) == [] for d in CONSUMERS)  # nothing ran them yet
    run_id = airflow.trigger("t9k_asset_train", conf={"metric": 0.8123})
    states = airflow.states_until("t9k_asset_train", run_id, {"success", "failed"}, timeout=180)
    assert states[-1] == "success", f"{states}\n{_errors(airflow, 't9k_asset_train', run_id)}"

    api = client.CustomObjectsApi(api_client)
    [job] = api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs")["items"]
    name = job["metadata"]["name"]
    model_uri = f"s3://t9k-e2e/models/churn/{run_id}"

    # The DAG scheduled on the asset ran, and its task read the metric from the event.
    def ended(dag_id: str) -> list[tuple[str, str]] | None:
        runs = _runs(airflow, dag_id)
        return runs if runs and all(state in ("success", "failed") for _, state in runs) else None

    [(evaluate_run, state)] = wait_until(
        lambda: ended("t9k_asset_evaluate"), timeout=120, interval=1, what="the asset-scheduled run"
    )
    assert state == "success", _errors(airflow, "t9k_asset_evaluate", evaluate_run)
    seen = _returned(airflow, "t9k_asset_evaluate", evaluate_run, "evaluate")
    assert seen == {"metric": 0.8123, "job": name, "uri": "s3://t9k-e2e/models/churn", "source_run_id": run_id}

    # The DAG scheduled on the alias: the alias resolves to the model version the result named
    # (Airflow re-parses it first), and it runs with that asset's event.
    [(alias_run, state)] = wait_until(
        lambda: ended("t9k_asset_evaluate_alias"), timeout=180, interval=1, what="the alias-scheduled run"
    )
    assert state == "success", _errors(airflow, "t9k_asset_evaluate_alias", alias_run)
    seen = _returned(airflow, "t9k_asset_evaluate_alias", alias_run, "evaluate_version")
    assert seen == {"metric": 0.8123, "job": name, "uri": model_uri, "source_run_id": run_id}

    # The job really ended with that message, and the event's extra is its result. Asked only
    # now: Airflow 3.3's events endpoint answers 500 while a run the event created has
    # no start_date yet (AssetEventResponse requires one), so it waits for the consumers to end.
    events = airflow.api("GET", "assets/events?source_dag_id=t9k_asset_train")["asset_events"]
    by_uri = {e["uri"]: e for e in events}
    assert set(by_uri) == {"s3://t9k-e2e/models/churn", model_uri}, events
    for event in by_uri.values():
        assert event["source_run_id"] == run_id
        assert event["extra"]["metric"] == 0.8123, event
        assert event["extra"]["model_uri"] == model_uri, event
        assert event["extra"]["t9k_job"] == {"kind": "GenericJob", "namespace": ns, "name": name, "uid": job["metadata"]["uid"]}


def test_openlineage_reports_the_training_with_the_jobs_facets(stack, api_client):
    airflow, ns = stack
    run_id = airflow.trigger("t9k_asset_train", conf={"metric": 0.42})
    states = airflow.states_until("t9k_asset_train", run_id, {"success", "failed"}, timeout=180)
    assert states[-1] == "success", f"{states}\n{_errors(airflow, 't9k_asset_train', run_id)}"
    jobs = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", ns, "genericjobs"
    )["items"]
    [job] = [j for j in jobs if j["metadata"]["annotations"]["airflow-t9k.io/run-id"] == run_id]

    def complete() -> dict | None:
        path = airflow.home / "lineage.jsonl"
        for line in path.read_text().splitlines() if path.exists() else []:
            event = json.loads(line)
            facets = event.get("run", {}).get("facets", {})
            if (event.get("eventType") == "COMPLETE" and event["job"]["name"] == "t9k_asset_train.train"
                    and facets.get("t9k_job", {}).get("uid") == job["metadata"]["uid"]):  # fmt: skip
                return event
        return None

    event = wait_until(complete, timeout=60, interval=1, what="the training task's OpenLineage COMPLETE event")
    facet = event["run"]["facets"]["t9k_job"]
    assert (facet["kind"], facet["namespace"], facet["name"], facet["phase"]) == (
        "GenericJob",
        ns,
        job["metadata"]["name"],
        "Succeeded",
    )
    assert facet["images"] == ["busybox"], facet
    assert sum(facet["replicas"].values()) == 1, facet
    try:  # what the job used, as XCom ``usage`` has it (docs/usage.md), without the task's total over its tries
        usage = _returned(airflow, "t9k_asset_train", run_id, "train", key="usage")
    except urllib.error.HTTPError as exc:
        if exc.code != 404:  # 404: no usage recorded
            raise
        usage = None
    if isinstance(usage, dict):
        assert usage.pop("task_total")["jobs"] == 1, usage  # one try, one job
    assert facet.get("usage") == usage, (facet, usage)
    # Every replica was given the task's run as its OpenLineage parent (issue 30, item 5): the
    # ids the listener reported, so the training's own events nest under the task.
    pods = (
        client.CoreV1Api(api_client)
        .list_namespaced_pod(ns, label_selector=f"batch.tensorstack.dev/job-name={job['metadata']['name']}")
        .items
    )
    assert pods
    parent = event["run"]["facets"]["parent"]
    for pod in pods:
        for container in pod.spec.containers:
            env = {e.name: e.value for e in container.env or []}
            assert env["OPENLINEAGE_PARENT_ID"] == f"{event['job']['namespace']}/t9k_asset_train.train/{event['run']['runId']}"
            assert env["OPENLINEAGE_PARENT_RUN_ID"] == event["run"]["runId"]
            root = parent.get("root") or parent
            assert env["OPENLINEAGE_ROOT_PARENT_ID"] == "/".join(
                (root["job"]["namespace"], root["job"]["name"], root["run"]["runId"])
            )
    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [("s3://t9k-e2e", "data/clicks")]
    assert sorted((d["namespace"], d["name"]) for d in event["outputs"]) == [
        ("s3://t9k-e2e", "models/churn"),
        ("s3://t9k-e2e", f"models/churn/{run_id}"),
    ]


def test_a_task_that_opts_out_gives_its_replicas_no_openlineage_parent(stack, api_client):
    airflow, ns = stack
    run_id = airflow.trigger("t9k_lineage_opt_out")
    states = airflow.states_until("t9k_lineage_opt_out", run_id, {"success", "failed"}, timeout=180)
    assert states[-1] == "success", f"{states}\n{_errors(airflow, 't9k_lineage_opt_out', run_id)}"
    jobs = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", ns, "genericjobs"
    )["items"]
    [job] = [j for j in jobs if j["metadata"]["annotations"]["airflow-t9k.io/run-id"] == run_id]
    pods = (
        client.CoreV1Api(api_client)
        .list_namespaced_pod(ns, label_selector=f"batch.tensorstack.dev/job-name={job['metadata']['name']}")
        .items
    )
    assert pods
    assert not [e.name for p in pods for c in p.spec.containers for e in c.env or [] if e.name.startswith("OPENLINEAGE_")]


def test_the_retraining_examples_evaluation_runs_on_the_model_asset(stack):
    airflow, _ = stack
    wait_until(lambda: airflow._dag_known("retraining_evaluation"), timeout=90, interval=1, what="retraining_evaluation parsed")
    airflow._retry_locked(lambda: airflow.api("PATCH", "dags/retraining_evaluation", {"is_paused": False}))
    assert _runs(airflow, "retraining_evaluation") == []
    # Unpausing the @weekly pipeline starts its latest scheduled run, whose training makes a model
    # of its own. Let that run and the evaluation its model starts end before ours: two model
    # events landing between the scheduler's read of the asset queue and its delete share one
    # queue row, and the later event starts no run (Airflow 3.3; CI saw the two trainings end
    # 67 ms apart and ours never evaluated).
    airflow._retry_locked(lambda: airflow.api("PATCH", "dags/retraining_pipeline", {"is_paused": False}))
    ended = wait_until(lambda: _ended(airflow, "retraining_pipeline"), timeout=180, interval=1,
                       what="the pipeline's scheduled run ended")  # fmt: skip
    if "success" in ended:
        wait_until(lambda: _ended(airflow, "retraining_evaluation"), timeout=120, interval=1,
                   what="the scheduled model's evaluation ended")  # fmt: skip
    run_id = airflow.trigger("retraining_pipeline", conf={"candidate_metric": 0.777})

    model_uri = f"s3://models/clicks-ranker/{run_id}"

    def ours() -> dict | None:
        """Our training's model, as an evaluation run saw it."""
        for evaluation, state in _runs(airflow, "retraining_evaluation"):
            if state == "failed":
                raise AssertionError(_errors(airflow, "retraining_evaluation", evaluation))
            if state == "success":
                for seen in _returned(airflow, "retraining_evaluation", evaluation, "evaluate_model"):
                    if seen["model_uri"] == model_uri:
                        return seen
        return None

    seen = wait_until(ours, timeout=240, interval=1, what="retraining_evaluation run on our model asset event")
    assert seen["metric"] == 0.777, seen
    assert seen["job"].startswith("train-"), seen
    wait_until(
        lambda: airflow.run_state("retraining_pipeline", run_id) in ("success", "failed"), timeout=60, what="the pipeline ended"
    )
    assert airflow.run_state("retraining_pipeline", run_id) == "success"
