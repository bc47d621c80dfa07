"""A Task Loop (Airflow 3.4, AIP-111) under a real Airflow (api-server, scheduler, dag-processor,
triggerer on SQLite), the bundled controller and the local cluster: a loop of two iterations whose
body is a deferrable training task trains two jobs, one per iteration, never reattaching the
second iteration to the first's job (docs/airflow.md, "Task Loops").

Airflow 3.3 has no loops: the module is skipped there; ``make test-airflow-next`` runs it
(scripts/test-airflow-next.sh).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from airflow_t9k.operators.manifest import LOOP_ITERATION, job_name
from tests.support.airflow import AirflowStack, airflow_on_cluster
from tests.support.cluster import wait_until

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("airflow.sdk.definitions.loop") is None,
    reason="Task Loops need Airflow 3.4 (make test-airflow-next)",
)

DAGS = Path(__file__).resolve().parent / "e2e_loop_dags"
DAG_ID, TASK_ID = "t9k_e2e_loop", "retrain.train"


@pytest.fixture(scope="module")
def loop_e2e(cluster, api_client, crds, tmp_path_factory) -> Iterator[tuple[AirflowStack, str]]:
    core = client.CoreV1Api(api_client)
    with airflow_on_cluster(cluster, core, tmp_path_factory.mktemp("airflow-loop"), "t9k-loop", dags=DAGS) as both:
        yield both


def _jobs(api_client, ns: str, run_id: str) -> list[dict]:
    items = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", ns, "genericjobs"
    )["items"]
    return [j for j in items if j["metadata"]["annotations"].get("airflow-t9k.io/run-id") == run_id]


def _log(stack: AirflowStack, run_id: str) -> str:
    """The run's task logs: an iteration's is ``task_id=<task>/pass=<iteration>/attempt=<n>.log``."""
    files = sorted((stack.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}").rglob("attempt=*.log"))
    return "".join(f.read_text(errors="replace") for f in files)


def _value(stored: str) -> object:
    """An XCom value as stored: JSON, or a JSON string holding JSON (serialize_value)."""
    value = json.loads(stored)
    return json.loads(value) if isinstance(value, str) else value


def test_each_iteration_of_a_task_loop_trains_its_own_job(loop_e2e, api_client):
    stack, ns = loop_e2e
    run_id = stack.trigger(DAG_ID)
    wait_until(
        lambda: stack.run_state(DAG_ID, run_id) in ("success", "failed"), timeout=300, interval=1, what="the loop's run ends"
    )
    log = _log(stack, run_id)
    assert stack.run_state(DAG_ID, run_id) == "success", log[-5000:]
    # Every iteration is a task instance of its own: the same task id and map index (-1), its
    # iteration the index in the loop's region; earlier tries would be archived rows.
    tis = stack._query("select region_index, state, try_number from task_instance where dag_id = ? and run_id = ? "
                       "and task_id = ? and working_set = 1 order by region_index", DAG_ID, run_id, TASK_ID)  # fmt: skip
    assert tis == [(0, "success", 1), (1, "success", 1)], tis

    jobs = sorted(_jobs(api_client, ns, run_id), key=lambda j: j["metadata"]["labels"].get(LOOP_ITERATION, ""))
    assert [j["metadata"]["name"] for j in jobs] == [job_name(DAG_ID, run_id, TASK_ID, -1, iteration=i) for i in (0, 1)], jobs
    assert [j["metadata"]["labels"][LOOP_ITERATION] for j in jobs] == ["0", "1"]
    assert [j["metadata"]["annotations"][LOOP_ITERATION] for j in jobs] == ["0", "1"]
    assert len({j["metadata"]["uid"] for j in jobs}) == 2
    assert all(j["status"]["phase"] == "Succeeded" for j in jobs), [j["status"] for j in jobs]
    for job in jobs:  # each iteration submitted its own; none took the job of an earlier one
        assert f"submitted GenericJob {ns}/{job['metadata']['name']} uid {job['metadata']['uid']}" in log, log[-5000:]
    assert "reattaching to the job of an earlier try" not in log

    # Each iteration recorded its own job (XCom t9k_job, per task instance) and delivered its result.
    recorded = stack._query("select ti.region_index, x.value from xcom_v2 x join task_instance ti on ti.id = x.task_instance_id "
                            "where ti.dag_id = ? and ti.run_id = ? and ti.task_id = ? and x.key = 't9k_job' "
                            "order by ti.region_index", DAG_ID, run_id, TASK_ID)  # fmt: skip
    assert [(i, _value(v)["uid"]) for i, v in recorded] == [(i, j["metadata"]["uid"]) for i, j in enumerate(jobs)]
    results = stack._query("select x.value from xcom_v2 x join task_instance ti on ti.id = x.task_instance_id "
                           "where ti.dag_id = ? and ti.run_id = ? and ti.task_id = ? and x.key = 'result'",
                           DAG_ID, run_id, TASK_ID)  # fmt: skip
    assert [_value(v) for (v,) in results] == [{"loss": 0.5}, {"loss": 0.5}]
