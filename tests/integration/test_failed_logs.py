"""On failure the failed replicas' logs reach the task log, the first to fail first and named
as the root cause in the task's error (issue 21, point 6), in both modes, within
``max_followed_pods`` and ``max_log_lines``.

Three replicas fail one after the other (kwok fails each after its own ``duration``); the job
fails only once all three have (one failure rule naming the three), so all three are
``Failed`` with distinct ``finishedAt``. kwok serves every pod's log from the local cluster's
pod-log file, so each replica's log ends with the lines this test appended.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, TaskDeferred

from airflow_t9k.operators.job import T9kJobOperator
from tests.integration.test_operator_trigger import _append_pod_log, conn, first_event  # noqa: F401 - fixtures
from tests.support.task import Store, context

# Failure order b, c, a: three seconds apart, as finishedAt has one-second resolution.
DURATIONS = {"a": "9s", "b": "3s", "c": "6s"}


def _op(**kw) -> T9kJobOperator:
    specs = [{"type": t, "replicas": 1, "template": {
        "metadata": {"annotations": {"sim.t9k.test/duration": d, "sim.t9k.test/fail-pods": ".*", "sim.t9k.test/exit-code": "3"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}}} for t, d in DURATIONS.items()]  # fmt: skip
    job = {"kind": "GenericJob", "spec": {"replicaSpecs": specs, "failureRules": [{"a": [0], "b": [0], "c": [0]}]}}
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return T9kJobOperator(task_id="train", job=job, log_events=False, stream_logs=False, result_from=None,
                              max_followed_pods=2, max_log_lines=6, log_tail_lines=2, **kw)  # fmt: skip


def _messages(out: str) -> list[str]:
    """What the task's logger printed, one entry per output line, without the logger's prefix
    and suffix (a record of several lines has them on its first and last)."""
    return [line.split("[info     ] ", 1)[-1].split(" [airflow", 1)[0].rstrip() for line in out.splitlines()]


@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferred"])
def test_the_failed_replicas_logs_come_first_failed_first_and_bounded(conn, cluster, jobs, controller, deferrable, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    marker = uuid.uuid4().hex[:8]
    store, op = Store(), _op(deferrable=deferrable)
    errors: list[BaseException] = []
    trigger: list[object] = []

    def run() -> None:
        try:
            op.execute(context(store))
        except TaskDeferred as exc:
            trigger.append(exc.trigger)
        except BaseException as exc:  # noqa: BLE001 - the failure is what the test looks at
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    while "t9k_job" not in store and worker.is_alive():
        time.sleep(0.2)
    name = store["t9k_job"]["name"]
    jobs.wait_phase("GenericJob", name, "Running")
    _append_pod_log(cluster, *[f"step {i} {marker}" for i in range(5)])  # before the first replica fails (3 s)
    worker.join(90)
    if deferrable:
        event = asyncio.run(first_event(trigger[0], timeout=90)).payload
        with pytest.raises(AirflowException) as exc:
            op.execute_complete(context(store), event)
        errors.append(exc.value)
    assert len(errors) == 1, errors
    assert isinstance(errors[0], AirflowException), errors
    pods = {t: f"{name}-{t}-0" for t in DURATIONS}
    job = jobs.get("GenericJob", name)
    ended = {r["name"]: r["containers"][0]["finishedAt"] for task in job["status"]["tasks"] for r in task["status"]}
    assert ended[pods["b"]] < ended[pods["c"]] < ended[pods["a"]], ended  # the controller kept when each ended

    # The task log: b's log (the root cause) first, then c's; each gets 3 of the 6 lines; a's is not printed.
    out = _messages(capsys.readouterr().out)
    headers = [i for i, m in enumerate(out) if m.startswith("--- log of failed replica ")]
    assert [out[i].split()[5] for i in headers] == [pods["b"], pods["c"]], [out[i] for i in headers]
    assert "(failed first: the root cause at " in out[headers[0]]
    assert "container main exit code 3" in out[headers[0]]
    assert "failed later" in out[headers[1]]
    assert out[headers[0]].endswith("its last 3 lines ---")
    for start in headers:
        assert out[start + 1 : start + 4] == [f"step {i} {marker}" for i in (2, 3, 4)], out[start : start + 5]
    assert any(m.startswith("--- not printed (max_followed_pods or max_log_lines): the logs of " + pods["a"]) for m in out)

    # The task's error: the replicas in the order they failed, b named as the root cause, its last 2 lines quoted.
    text = str(errors[0])
    assert f"failed replicas: {pods['b']}, {pods['c']}, {pods['a']}" in text, text
    assert f"root cause: replica {pods['b']} failed first (at {ended[pods['b']]}, container main exit code 3 (Error))" in text, (
        text
    )
    assert text.endswith(f"--- last lines of {pods['b']} ---\nstep 3 {marker}\nstep 4 {marker}"), text
