"""Replica logs reach the task log in both modes (issue 21, point 6): the worker-side wait
follows the deciding replica as the trigger does, and ``log_replicas``/``max_log_lines`` set
what and how much. kwok serves every pod's log from the test namespace's pod-log file."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from airflow.sdk.exceptions import TaskDeferred

from tests.integration.test_operator_trigger import _append_pod_log, conn, first_event, make_op  # noqa: F401 - fixtures
from tests.support.task import Store, context


def _forwarded(out: str, marker: str) -> list[str]:
    """The forwarded lines' messages ("[pod] text"), out of what the task's logger printed."""
    return [line.split("[info     ] ", 1)[1].split(" [airflow", 1)[0].strip() for line in out.splitlines() if marker in line]


@pytest.mark.parametrize(("log_replicas", "expected_pods"), [("deciding", ["worker-0"]), ("all", ["worker-0", "worker-1"])])
def test_the_worker_side_wait_streams_replica_logs(conn, cluster, jobs, controller, log_replicas, expected_pods, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    store, marker = Store(), uuid.uuid4().hex[:8]
    op = make_op(sim={"sim.t9k.test/duration": "8s"}, deferrable=False, log_events=False, log_replicas=log_replicas)
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(op.execute(context(store))), daemon=True)
    worker.start()
    try:
        while "t9k_job" not in store:
            time.sleep(0.2)
        name = store["t9k_job"]["name"]
        jobs.wait_phase("GenericJob", name, "Running")
        time.sleep(3)  # the followers attach once the containers run
        _append_pod_log(cluster, jobs.ns, f"epoch 1 loss 0.9 {marker}", f"epoch 2 loss 0.5 {marker}")
    finally:
        worker.join(60)
    assert outcome
    assert outcome[0]["phase"] == "Succeeded"
    lines = _forwarded(capsys.readouterr().out, marker)
    for suffix in expected_pods:
        pod = f"{name}-{suffix}"
        assert [line for line in lines if line.startswith(f"[{pod}]")] == [
            f"[{pod}] epoch 1 loss 0.9 {marker}", f"[{pod}] epoch 2 loss 0.5 {marker}"], lines  # fmt: skip
    assert len(lines) == 2 * len(expected_pods)  # only those replicas, each line once


@pytest.mark.asyncio
async def test_the_deferred_wait_follows_only_the_deciding_replica_by_default(conn, cluster, jobs, controller, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    with pytest.raises(TaskDeferred) as exc:
        make_op(sim={"sim.t9k.test/duration": "6s"}, deferrable=True, log_events=False).execute(context())
    trigger = exc.value.trigger
    assert trigger.forwarding.follow_pods == (f"{trigger.name}-worker-0",)
    task = asyncio.create_task(first_event(trigger))
    jobs.wait_phase("GenericJob", trigger.name, "Running")
    await asyncio.sleep(1.5)
    marker = uuid.uuid4().hex[:8]
    _append_pod_log(cluster, jobs.ns, f"step {marker}")
    assert (await task).payload["status"] == "success"
    out = [line for line in capsys.readouterr().out.splitlines() if marker in line]
    assert len(out) == 1, out
    assert f"[{trigger.name}-worker-0]" in out[0], out


@pytest.mark.asyncio
async def test_a_job_that_ended_before_its_trigger_ran_still_has_its_lines_forwarded(conn, cluster, jobs, controller, capsys):
    """A short job can end before its trigger first looks (the triggerer busy or restarting): no
    replica is running to follow, and the lines it wrote are read once at the end instead."""
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    with pytest.raises(TaskDeferred) as exc:
        make_op(sim={"sim.t9k.test/duration": "2s"}, deferrable=True, log_events=False).execute(context())
    trigger = exc.value.trigger
    jobs.wait_phase("GenericJob", trigger.name, "Running")
    marker = uuid.uuid4().hex[:8]
    _append_pod_log(cluster, jobs.ns, f"only line {marker}")
    jobs.wait_phase("GenericJob", trigger.name, "Succeeded")
    assert (await first_event(trigger)).payload["status"] == "success"
    out = [line for line in capsys.readouterr().out.splitlines() if marker in line]
    assert len(out) == 1, out
    assert f"[{trigger.name}-worker-0] only line {marker}" in out[0], out


def test_the_worker_side_reads_each_replicas_log_once_more_when_the_job_ended(conn, cluster, jobs, controller, caplog):
    """The worker-side wait's end reads, from its cursor, the log of each replica no follower is
    still reading: here none ever ran (the job ended before the wait looked), as when a
    follower was between two opens of its stream at the end."""
    import logging

    from airflow_t9k.operators.logs import LogFollower

    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    store = Store()
    op = make_op(sim={"sim.t9k.test/duration": "2s"}, deferrable=True, log_events=False)
    with pytest.raises(TaskDeferred):
        op.execute(context(store))
    ident = store["t9k_job"]
    log = logging.getLogger("t9k-test-finish")
    follower = LogFollower(op.hook, jobs.ns, log, 100, 8, None, owner_uid=ident["uid"])
    jobs.wait_phase("GenericJob", ident["name"], "Running")
    marker = uuid.uuid4().hex[:8]
    _append_pod_log(cluster, jobs.ns, f"last line {marker}")
    job = jobs.wait_phase("GenericJob", ident["name"], "Succeeded")
    with caplog.at_level(logging.INFO, logger=log.name):
        follower.finish(job)
    lines = sorted(r.getMessage() for r in caplog.records if marker in r.getMessage())
    assert lines == [f"[{ident['name']}-worker-{i}] last line {marker}" for i in (0, 1)], lines
