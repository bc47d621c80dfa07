"""Log lines that share a timestamp all reach the task log (issue 28, point 2), in both modes and
in the failure print. CRI-O stamps every line of one read buffer alike; the local cluster's kwok
serves every pod's log from one file, to which this test appends runs of lines with one stamp.

Each line is forwarded once: a stream is never filtered by stamp, and a reconnect (the worker
side reopens a stream silent for 10 s; the reopened stream replays from the second of the last
line sent) skips exactly the lines already sent at the last stamp.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import datetime, timezone

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred

from tests.integration.test_operator_trigger import conn, first_event, make_op  # noqa: F401
from tests.support.task import Store, context


def _append_one_stamp(cluster, namespace: str, stamp: str, *lines: str) -> None:
    """Lines with one and the same stamp, as CRI-O writes one read buffer, in ``namespace``'s pods."""
    cluster.print_to_pods(namespace, "".join(f"{stamp} stdout F {line}\n" for line in lines))


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000000000Z")


def _forwarded(out: str, marker: str) -> list[str]:
    return [line.split("[info     ] ", 1)[1].split(" [airflow", 1)[0].strip() for line in out.splitlines()
            if marker in line and "[info     ] [" in line]  # fmt: skip


@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferred"])
def test_lines_that_share_a_stamp_are_all_streamed_once(conn, cluster, jobs, controller, deferrable, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    store, marker = Store(), uuid.uuid4().hex[:8]
    op = make_op(sim={"sim.t9k.test/duration": "30s"}, deferrable=deferrable, log_events=False)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(op.execute(context(store)))
        except TaskDeferred as exc:
            outcome.append(asyncio.run(first_event(exc.trigger, timeout=90)).payload)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        while "t9k_job" not in store:
            time.sleep(0.2)
        name = store["t9k_job"]["name"]
        jobs.wait_phase("GenericJob", name, "Running")
        time.sleep(3)  # the followers attach once the containers run
        stamp = _stamp()
        _append_one_stamp(cluster, jobs.ns, stamp, *[f"batch 1 line {i} {marker}" for i in range(3)])
        # Silent for longer than the worker side's 10 s: its stream is reopened from that second,
        # which replays the three lines above; then two more lines with the same stamp.
        time.sleep(13)
        _append_one_stamp(cluster, jobs.ns, stamp, *[f"batch 2 line {i} {marker}" for i in range(2)])
    finally:
        worker.join(120)
    assert [o["phase"] for o in outcome] == ["Succeeded"], outcome
    pod = f"{name}-worker-0"
    expected = [f"[{pod}] batch 1 line {i} {marker}" for i in range(3)] + [f"[{pod}] batch 2 line {i} {marker}" for i in range(2)]
    assert _forwarded(capsys.readouterr().out, marker) == expected


@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferred"])
def test_the_failure_print_keeps_the_unsent_lines_of_the_last_streamed_stamp(conn, cluster, jobs, controller, deferrable,
                                                                             capsys):  # fmt: skip
    """Streaming stops at ``max_log_lines`` (2) inside a run of five lines with one stamp; the
    failure print (2 more lines) prints the run's last two, which the stream did not send."""
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    store, marker = Store(), uuid.uuid4().hex[:8]
    sim = {"sim.t9k.test/duration": "12s", "sim.t9k.test/fail-pods": "-worker-0$", "sim.t9k.test/exit-code": "3"}
    op = make_op(sim=sim, deferrable=deferrable, log_events=False, max_log_lines=2, log_tail_lines=2,
                 result_from=None)  # fmt: skip
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute(context(store))
        except TaskDeferred as exc:
            event = asyncio.run(first_event(exc.trigger, timeout=90)).payload
            try:
                op.execute_complete(context(store), event)
            except BaseException as failed:  # noqa: BLE001 - the failure is what the test looks at
                errors.append(failed)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    while "t9k_job" not in store and worker.is_alive():
        time.sleep(0.2)
    name = store["t9k_job"]["name"]
    jobs.wait_phase("GenericJob", name, "Running")
    time.sleep(3)
    _append_one_stamp(cluster, jobs.ns, _stamp(), *[f"line {i} {marker}" for i in range(5)])
    worker.join(120)
    assert len(errors) == 1, errors
    assert isinstance(errors[0], AirflowException), errors
    pod = f"{name}-worker-0"
    messages = [
        line.split("[info     ] ", 1)[-1].split(" [airflow", 1)[0].rstrip() for line in capsys.readouterr().out.splitlines()
    ]
    assert [m for m in messages if m.startswith(f"[{pod}]") and marker in m] == [f"[{pod}] line {i} {marker}" for i in (0, 1)]
    [header] = [i for i, m in enumerate(messages) if m.startswith(f"--- log of failed replica {pod} ")]
    assert "2 lines, the lines streamed above not repeated" in messages[header], messages[header]
    assert messages[header + 1 : header + 3] == [f"line 3 {marker}", f"line 4 {marker}"], messages[header : header + 4]
