"""A real triggerer stopped while tasks are deferred, their deadline passing while it is down
(issue 21, point 3).

A real Airflow (api-server, scheduler, dag-processor, triggerer), the bundled controller, the
local cluster. Three tasks defer on their jobs with ``timeout=T9K_LATE_TIMEOUT``; once every
trigger runs, the triggerer is stopped as a restart stops it (SIGTERM). While it is down the
test releases two jobs' pods (kwok holds a pod Running until it has a duration), which end
(one succeeds, one fails), and every task's deadline passes; the third job still runs.
Started again, the triggerer takes the triggers over, each past its deadline, and each must
read its job once and report what the job really did: the task of the job that succeeded
succeeds (its job kept), the one whose job failed fails with the job's failure, and only the
one whose job still runs times out (the documented ``timeout``: the job is deleted, the task
fails). No task is retried, and the outcome comes promptly after the takeover.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from kubernetes import client

from tests.support.airflow import AirflowStack, airflow_on_cluster
from tests.support.cluster import wait_until
from tests.support.kubelet import release_pods

DAGS = Path(__file__).resolve().parent / "e2e_late_dags"
DAG_ID = "t9k_e2e_late"
TIMEOUT = 75  # the tasks' deadline after submission: room for all three to defer on a loaded machine
MARGIN = 10  # the stop comes at least this long before the deadline, so no trigger times out while it runs
HEALTH_THRESHOLD = 10  # a triggerer silent this long is taken for gone: its triggers move
TASKS = ("succeeds", "fails", "runs")
GROUP, VERSION, PLURAL = "batch.tensorstack.dev", "v1beta1", "genericjobs"


@pytest.fixture(scope="module")
def late(cluster, api_client, crds, tmp_path_factory) -> Iterator[tuple[AirflowStack, str]]:
    env = {"T9K_LATE_TIMEOUT": str(TIMEOUT), "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": str(HEALTH_THRESHOLD)}
    home = tmp_path_factory.mktemp("airflow-e2e-late")
    with airflow_on_cluster(cluster, client.CoreV1Api(api_client), home, "t9k-e2e-late", dags=DAGS, env=env) as both:
        yield both


def _jobs(api_client, ns: str, run_id: str) -> dict[str, dict]:
    """The run's jobs by task id."""
    items = client.CustomObjectsApi(api_client).list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
    return {j["metadata"]["annotations"]["airflow-t9k.io/task-id"]: j for j in items
            if j["metadata"]["annotations"].get("airflow-t9k.io/run-id") == run_id}  # fmt: skip


def _triggers(stack: AirflowStack, run_id: str) -> dict[str, tuple[str, int | None]]:
    """task id -> (state, id of the triggerer running its trigger)."""
    rows = stack._query("select ti.task_id, ti.state, t.triggerer_id from task_instance ti "
                        "left join trigger t on t.id = ti.trigger_id "
                        "where ti.dag_id = ? and ti.run_id = ?", DAG_ID, run_id)  # fmt: skip
    return {task: (state, who) for task, state, who in rows}


def _log(stack: AirflowStack, run_id: str, task_id: str) -> str:
    path = stack.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
    return "".join(f.read_text(errors="replace") for f in sorted(path.glob("attempt=*.log")))


def _created(job: dict) -> float:
    return datetime.fromisoformat(job["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp()


def test_a_trigger_started_after_its_deadline_reports_what_the_job_did(late, api_client):
    stack, ns = late
    run_id = stack.trigger(DAG_ID)

    def all_watched() -> bool:
        rows, jobs = _triggers(stack, run_id), _jobs(api_client, ns, run_id)
        if len(rows) != 3 or len(jobs) != 3 or any(state != "deferred" or who is None for state, who in rows.values()):
            return False
        # each trigger has logged its job's phase: it runs
        return all(f"/{jobs[t]['metadata']['name']}: phase" in _log(stack, run_id, t) for t in TASKS)

    wait_until(all_watched, timeout=TIMEOUT - 15, interval=0.5, what="three tasks deferred, each trigger running")
    jobs = _jobs(api_client, ns, run_id)
    deadline = max(_created(j) for j in jobs.values()) + TIMEOUT + 3  # the operator sets it just after submitting
    assert all((j.get("status") or {}).get("phase") in ("Pending", "Running") for j in jobs.values()), (
        "a job ended before the stop"
    )
    assert time.time() < deadline - MARGIN, "the deadline is too close; raise TIMEOUT"

    stack.terminate("triggerer")
    release_pods(client.CoreV1Api(api_client), ns, [jobs[t]["metadata"]["name"] for t in ("succeeds", "fails")])

    def ended() -> bool:
        phases = {t: (j.get("status") or {}).get("phase") for t, j in _jobs(api_client, ns, run_id).items()}
        return phases["succeeds"] == "Succeeded" and phases["fails"] == "Failed" and time.time() > deadline

    wait_until(ended, timeout=TIMEOUT + 60, interval=0.5, what="two jobs ended and every deadline passed")
    assert {state for state, _ in _triggers(stack, run_id).values()} == {"deferred"}  # nothing decided without a triggerer
    assert (_jobs(api_client, ns, run_id)["runs"].get("status") or {}).get("phase") == "Running"
    stack.launch("triggerer")
    restarted = time.monotonic()

    def final() -> dict[str, tuple[str | None, int, str | None]] | None:
        tis = stack.tis(DAG_ID, run_id)
        return tis if all(tis[t][0] in ("success", "failed") for t in TASKS) else None

    tis = wait_until(final, timeout=HEALTH_THRESHOLD + 90, interval=0.5, what="every task ended")
    took = time.monotonic() - restarted

    assert {t: (s, n) for t, (s, n, _) in tis.items()} == {
        "succeeds": ("success", 1),
        "fails": ("failed", 1),
        "runs": ("failed", 1),
    }
    # Within the takeover and one bounded read, not another wait (the triggers' backstop is 15 s past the deadline).
    assert took < HEALTH_THRESHOLD + 45, took

    logs = {t: _log(stack, run_id, t) for t in TASKS}
    after = {t: _jobs(api_client, ns, run_id).get(t) for t in TASKS}
    assert "timed out" not in logs["succeeds"], logs["succeeds"][-3000:]
    assert "succeeded: phase Succeeded" in logs["succeeds"], logs["succeeds"][-3000:]
    assert after["succeeds"] is not None
    assert after["succeeds"]["metadata"]["uid"] == jobs["succeeds"]["metadata"]["uid"]
    assert "timed out" not in logs["fails"], logs["fails"][-3000:]
    assert "root cause: replica" in logs["fails"], logs["fails"][-3000:]
    # The trigger itself reported the end (and printed the failed replica's log from the triggerer):
    # not the task's own re-read of a job it was told had timed out.
    for task in ("succeeds", "fails"):
        assert "by the time its timeout was handled" not in logs[task], logs[task][-3000:]
    assert "--- log of failed replica " in logs["fails"], logs["fails"][-3000:]
    assert after["fails"] is not None  # a failed job is kept for its evidence (delete_on_finish="never")
    name = jobs["runs"]["metadata"]["name"]
    # it read the job (Running), rather than "never seen", and then timed out as documented
    assert f"timed out waiting for GenericJob {name} (phase Running" in logs["runs"], logs["runs"][-3000:]
    wait_until(
        lambda: "runs" not in _jobs(api_client, ns, run_id), timeout=30, what="the still-running job deleted on its timeout"
    )
