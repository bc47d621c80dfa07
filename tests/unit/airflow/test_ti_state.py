"""TIJobOperator's XCom ``ti_state`` shows ``Running`` while the job runs (issue 47, item 5), in both
waits: the worker-side wait pushes it when it sees the phase; a deferred task's trigger writes it
into the task's XCom from the triggerer (``Forwarding.running_xcom``), with no extra resume. Before
issue 47 it was written only when the job was submitted (Created) and at the end."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from airflow_t9k.triggers import cursors
from airflow_t9k.triggers.job import T9kJobTrigger
from tests.unit.airflow.test_operators import FakeTI
from tests.unit.airflow.test_ti_operator import ti_op

Obj = dict[str, Any]
IDENTITY = {"kind": "TensorFlowTrainingJob", "name": "j", "namespace": "ml", "uid": "u"}


class History(FakeTI):
    """A task instance that keeps every push, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.pushed: list[tuple[str, Any]] = []

    def xcom_push(self, key, value):
        super().xcom_push(key, value)
        self.pushed.append((key, value))


def job(phase: str) -> Obj:
    return {"kind": "TensorFlowTrainingJob", "metadata": {"name": "j", "namespace": "ml", "uid": "u", "resourceVersion": "1"},
            "status": {"phase": phase}}  # fmt: skip


def states(ti: History) -> list[str]:
    return [v for k, v in ti.pushed if k == "ti_state"]


class PhasesHook:
    """The job as the worker-side wait reads it: one phase per read; the watch returns at once."""

    def __init__(self, *phases: str) -> None:
        self.phases = list(phases)
        self.custom_object_client = type("C", (), {"list_namespaced_custom_object": None})()

    def get_job(self, kind, name, namespace):
        return job(self.phases.pop(0) if len(self.phases) > 1 else self.phases[0])

    def boundary(self, verb, path):
        return contextlib.nullcontext()

    def patch_job(self, kind, name, namespace, patch):  # the end marks the job delivered
        return {"metadata": {"name": name, "uid": "u"}}


class OneEventWatch:
    def stream(self, *args, **kwargs):
        yield {"type": "MODIFIED"}

    def stop(self) -> None:
        pass


def test_the_worker_side_wait_pushes_running_once_then_the_end(monkeypatch):
    import kubernetes.watch

    monkeypatch.setattr(kubernetes.watch, "Watch", OneEventWatch)
    op = ti_op(stream_logs=False, deferrable=False)
    op._hook = PhasesHook("Pending", "Running", "Running", "Paused", "Running", "Succeeded")
    ti = History()
    op._state_ti = ti
    op._push_state("Created")
    event = op._wait_sync(IDENTITY, None)
    assert event["phase"] == "Succeeded"
    op._finish({"ti": ti}, event)
    # TI's states only move forward: Paused is Running to TI, and Running is said once.
    assert states(ti) == ["Created", "Running", "Succeeded"]


@pytest.mark.parametrize(
    ("phase", "pushed", "running_xcom"),
    [
        ("Pending", ["Created"], ["ti_state", "Running"]),  # the trigger writes it when the job runs
        ("Running", ["Created", "Running"], None),  # reattached to a running job: said before deferring
    ],
)
def test_before_deferring_the_trigger_is_told_to_write_running_unless_it_is_said(phase, pushed, running_xcom):
    op = ti_op(deferrable=True)
    ti = History()
    op._state_ti = ti
    op._push_state("Created")
    op._phase_seen(phase)  # what execute does with the job it found or submitted
    assert states(ti) == pushed
    kwargs = op._trigger(IDENTITY, None).serialize()[1]
    assert kwargs["forwarding"]["running_xcom"] == running_xcom


def test_nothing_is_asked_of_the_trigger_without_xcoms_or_for_other_operators():
    op = ti_op(do_xcom_push=False)
    assert op._trigger(IDENTITY, None).serialize()[1]["forwarding"]["running_xcom"] is None
    from datetime import datetime

    from airflow.sdk import DAG

    from airflow_t9k.operators.kinds import GenericJobOperator

    with DAG("dag2", start_date=datetime(2026, 1, 1), schedule=None):
        other = GenericJobOperator(task_id="t", image="i", namespace="ml")
    assert other._trigger(IDENTITY, None).serialize()[1]["forwarding"]["running_xcom"] is None


class FakeSharedWatch:
    """What the trigger's wait reads of the shared watch: the job as it is now."""

    failure = None
    hook = None

    def __init__(self, current: Obj) -> None:
        self.current = current

    def is_synced(self) -> bool:
        return True

    def get(self, namespace, name):
        return self.current


@pytest.mark.asyncio
async def test_the_trigger_writes_running_once_while_the_job_runs_and_before_its_end(monkeypatch):
    written: list[tuple[str, Any]] = []

    async def put(trigger, key, value):
        written.append((key, value))
        return True

    monkeypatch.setattr(cursors, "put", put)
    forwarding = {"log_events": False, "stream_logs": False, "running_xcom": ["ti_state", "Running"]}
    trigger = T9kJobTrigger(job={"kind": "TensorFlowTrainingJob", "namespace": "ml", "name": "j", "uid": "u"},
                            forwarding=forwarding)  # fmt: skip
    watch = FakeSharedWatch(job("Pending"))
    changed = asyncio.Event()
    waiting = asyncio.create_task(trigger._wait(watch, changed))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert written == []  # Pending: TI's Created, already said by the task
    for _ in range(2):  # the job runs, and changes again while running (a pod restarts)
        watch.current = job("Running")
        changed.set()
        await asyncio.sleep(0.05)
    assert written == [("ti_state", "Running")]
    watch.current = job("Succeeded")
    changed.set()
    event = await asyncio.wait_for(waiting, 5)
    assert event.payload["phase"] == "Succeeded"
    assert written == [("ti_state", "Running")]  # once; the task writes Succeeded from the event


@pytest.mark.asyncio
async def test_a_trigger_without_a_task_instance_writes_nothing_and_says_so(capsys):
    trigger = T9kJobTrigger(job={"kind": "TensorFlowTrainingJob", "namespace": "ml", "name": "j", "uid": "u"},
                            forwarding={"running_xcom": ["ti_state", "Running"]})  # fmt: skip
    await trigger._running_seen()  # `airflow dags test`'s in-process runner: no task instance
    await trigger._running_seen()
    assert trigger._running_written is True
    assert capsys.readouterr().out.count("could not write XCom ti_state=Running") == 1


def test_an_older_row_without_running_xcom_loads_and_writes_nothing():
    from airflow_t9k.triggers import records

    _, _, _, forwarding, _, notes = records.from_kwargs({"version": 2, "job": {"kind": "GenericJob", "namespace": "ml"},
                                                         "forwarding": {"stream_logs": True}})  # fmt: skip
    assert forwarding.running_xcom is None
    assert notes == []
