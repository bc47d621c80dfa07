"""Replica logs reach the task log in both modes (issue 21, point 6): the worker-side wait
follows the deciding replica as the trigger does, and ``log_replicas``/``max_log_lines`` set
what and how much. kwok serves every pod's log from the test namespace's pod-log file. A line of
megabytes (a progress bar redrawn with ``\r``) does not stop either mode's streaming (issue 44, 3)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from airflow.sdk.exceptions import TaskDeferred

from tests.integration.test_operator_trigger import _append_pod_log, conn, first_event, make_op  # noqa: F401 - fixtures
from tests.support.task import Store, context


def _forwarded(out: str, marker: str) -> list[str]:
    """The forwarded lines' messages ("[pod] text"), out of what the task's logger printed."""
    return [line.split("[info     ] ", 1)[1].split(" [airflow", 1)[0].strip() for line in out.splitlines() if marker in line]


@contextlib.contextmanager
def running(op, jobs, settle: float = 2.0) -> Iterator[tuple[list[object], str]]:
    """The task's ``execute`` in a thread (deferred: its trigger until its one event), as a worker
    runs it; yields (its outcome, once it ended; the job's name) once the job runs and the
    followers had ``settle`` seconds to attach, and waits for the task at the end."""
    store: Store = Store()
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(op.execute(context(store)))
        except TaskDeferred as exc:
            outcome.append(asyncio.run(first_event(exc.trigger)).payload)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        while "t9k_job" not in store:
            time.sleep(0.2)
        name = store["t9k_job"]["name"]
        jobs.wait_phase("GenericJob", name, "Running")
        time.sleep(settle)  # the followers attach once the containers run
        yield outcome, name
    finally:
        worker.join(60)


@pytest.mark.parametrize(("log_replicas", "expected_pods"), [("deciding", ["worker-0"]), ("all", ["worker-0", "worker-1"])])
def test_the_worker_side_wait_streams_replica_logs(conn, cluster, jobs, controller, log_replicas, expected_pods, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    marker = uuid.uuid4().hex[:8]
    op = make_op(sim={"sim.t9k.test/duration": "8s"}, deferrable=False, log_events=False, log_replicas=log_replicas)
    with running(op, jobs, settle=3) as (outcome, name):
        _append_pod_log(cluster, jobs.ns, f"epoch 1 loss 0.9 {marker}", f"epoch 2 loss 0.5 {marker}")
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


MIB = 1 << 20
REDRAWS = 80_000  # a progress bar's redraws, about 5 MiB in all


def _print_long_lines(cluster, namespace: str, marker: str) -> None:
    """As if every pod of ``namespace`` printed a progress bar redrawn with ``\\r`` for an hour
    (one line of about 5 MiB, written as containerd writes it: 16 KiB partial records, then the
    rest), a plain line of 5 MiB, and then the marker line."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    bar = "".join(
        f"\r{i * 100 // REDRAWS:3d}%|{'#' * (i * 40 // REDRAWS):40s}| {i}/{REDRAWS} [it/s]" for i in range(1, REDRAWS + 1)
    )
    assert len(bar) > 5 * MIB
    records = [bar[i : i + 16384] for i in range(0, len(bar), 16384)]
    text = "".join(f"{now}.{n:09d}Z stdout {'P' if n < len(records) - 1 else 'F'} {r}\n" for n, r in enumerate(records))
    n = len(records)
    text += f"{now}.{n:09d}Z stdout F {'x' * (5 * MIB)}\n{now}.{n + 1:09d}Z stdout F after the long lines {marker}\n"
    cluster.print_to_pods(namespace, text)


def _check_long_lines(out: str, pod: str, marker: str) -> None:
    """The marker reached the task log once, after the bar's last redraw and the plain line's
    start with its cut mark; no line of 5 MiB did."""
    mine = [line for line in out.split("\n") if f"[{pod}]" in line]  # split at newlines only: a \r stays in its line
    assert sum(f"[{pod}] after the long lines {marker}" in line for line in mine) == 1, [m[:200] for m in mine]
    assert max(len(line) for line in mine) < 20_000, [len(m) for m in mine]
    assert any(f"| {REDRAWS}/{REDRAWS} [it/s]" in line and "\r" not in line for line in mine)  # the bar's last redraw
    assert any("xxxx \u2026 [cut: " in line for line in mine)  # the plain line: its start, and how much was left out
    assert "x" * (5 * MIB) not in out


def test_a_5mib_line_does_not_stop_the_worker_side_wait_streaming(conn, cluster, jobs, controller, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    marker = uuid.uuid4().hex[:8]
    op = make_op(sim={"sim.t9k.test/duration": "8s"}, deferrable=False, log_events=False)
    with running(op, jobs) as (outcome, name):
        _print_long_lines(cluster, jobs.ns, marker)
    assert outcome
    assert outcome[0]["phase"] == "Succeeded"
    _check_long_lines(capsys.readouterr().out, f"{name}-worker-0", marker)


@pytest.mark.asyncio
async def test_a_5mib_line_does_not_stop_the_deferred_wait_streaming(conn, cluster, jobs, controller, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    with pytest.raises(TaskDeferred) as exc:
        make_op(sim={"sim.t9k.test/duration": "6s"}, deferrable=True, log_events=False).execute(context())
    trigger = exc.value.trigger
    task = asyncio.create_task(first_event(trigger))
    jobs.wait_phase("GenericJob", trigger.name, "Running")
    await asyncio.sleep(1.5)
    marker = uuid.uuid4().hex[:8]
    _print_long_lines(cluster, jobs.ns, marker)
    assert (await task).payload["status"] == "success"
    _check_long_lines(capsys.readouterr().out, f"{trigger.name}-worker-0", marker)


@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferred"])
def test_the_last_lines_are_printed_after_the_line_budget_ran_out(conn, cluster, jobs, controller, deferrable, capsys):
    """Issue 44, item 7: with ``max_log_lines`` spent early, the end of the training (its last
    ``log_tail_lines``) still reaches the task log, once, under its own header."""
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    marker = uuid.uuid4().hex[:8]
    op = make_op(sim={"sim.t9k.test/duration": "7s"}, deferrable=deferrable, log_events=False, max_log_lines=3,
                 log_tail_lines=2)  # fmt: skip
    with running(op, jobs) as (outcome, _name):
        _append_pod_log(cluster, jobs.ns, *[f"step {i} {marker}" for i in range(10)])
    assert outcome
    out = capsys.readouterr().out
    steps = [line for line in out.splitlines() if marker in line]
    assert sum(f"step {i} {marker}" in line for line in steps for i in range(3)) == 3, steps  # the budget: three lines
    assert any("the last 2 lines of" in line and "after max_log_lines=3 ran out" in line for line in out.splitlines()), out[
        -3000:
    ]
    for i in (8, 9):  # the end of the training, once each
        assert sum(f"step {i} {marker}" in line for line in steps) == 1, steps
    for i in range(3, 8):  # and nothing in between
        assert not any(f"step {i} {marker}" in line for line in steps), steps
