"""on_predicted_overrun and the deadline the job carries (operators/overrun.py, issue 48 item 4)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG
from airflow.sdk.definitions.callback import AsyncCallback
from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference
from airflow.sdk.exceptions import TaskDeferred

from airflow_t9k.api import overrun
from airflow_t9k.operators.kinds import GenericJobOperator
from airflow_t9k.operators.overrun import PREDICTED_OVERRUN, PredictedOverrun
from tests.unit.airflow.test_operators import FakeTI, RecordingHook, event

START = datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc)


async def _alerted(**_: Any) -> None:  # a DeadlineAlert's own callback (Airflow's, after the miss)
    return None


def alert(reference: Any, minutes: int, name: str | None = None) -> DeadlineAlert:
    return DeadlineAlert(reference=reference, interval=timedelta(minutes=minutes), callback=AsyncCallback(_alerted), name=name)


def ti(start: datetime | None = START) -> Any:
    t = FakeTI()
    t.start_date = start
    return t


@pytest.mark.parametrize(
    ("kw", "alerts", "dag_run", "expected"),
    [
        ({}, [], None, None),  # nothing bounds the try
        ({"execution_timeout": timedelta(hours=2)}, [], None, (START + timedelta(hours=2), "the task's execution_timeout")),
        (
            {"execution_timeout": timedelta(hours=2)},
            [alert(DeadlineReference.FIXED_DATETIME(START + timedelta(hours=1)), 0, "sla")],
            None,
            (START + timedelta(hours=1), "the DAG run's deadline alert 'sla'"),
        ),
        (
            {},
            [alert(DeadlineReference.DAGRUN_LOGICAL_DATE, 90)],
            SimpleNamespace(logical_date=START),
            (START + timedelta(minutes=90), "the DAG run's deadline alert"),
        ),
        ({}, [alert(DeadlineReference.DAGRUN_LOGICAL_DATE, 90)], SimpleNamespace(logical_date=None), None),  # a manual run
        ({}, [alert(DeadlineReference.DAGRUN_QUEUED_AT, 90)], SimpleNamespace(logical_date=START), None),  # not known here
        ({}, [alert(DeadlineReference.AVERAGE_RUNTIME(max_runs=5), 90)], None, None),
    ],
)
def test_the_try_deadline_is_the_earliest_known(kw: dict[str, Any], alerts: list[Any], dag_run: Any, expected: Any) -> None:
    with DAG("d", schedule=None, deadline=alerts or None):
        op = GenericJobOperator(task_id="train", image="i", **kw)
    assert op._try_deadline({"ti": ti(), "dag_run": dag_run}) == expected


def test_timeout_counts_from_now() -> None:
    op = GenericJobOperator(task_id="train", image="i", timeout=600, execution_timeout=timedelta(days=1))
    now = datetime.now(timezone.utc)
    when, what = op._try_deadline({"ti": ti(now)}) or (None, "")
    assert what == "the task's timeout"
    assert when is not None
    assert 600 <= (when - now).total_seconds() < 605


MARKS = {overrun.DEADLINE: "2026-12-02T12:00:00Z", overrun.DEADLINE_SOURCE: "the task's timeout"}


def late_job(turn: str = "2026-12-02T10:05:00Z", status: str = "True") -> dict[str, Any]:
    return {"kind": "GenericJob",
            "metadata": {"name": "j", "namespace": "ml", "uid": "u", "annotations": MARKS},
            "status": {"phase": "Running", "progress": {"updated": "2026-12-02T10:05:00Z", "etaSeconds": 10800, "eta": "3h"},
                       "conditions": [{"type": overrun.CONDITION, "status": status, "lastTransitionTime": turn,
                                       "message": "at its ETA (3h) the job ends about 2026-12-02T13:05:00Z"}]}}  # fmt: skip


def test_new_jobs_carry_the_deadline_and_a_reattached_one_is_patched_only_when_it_differs() -> None:
    op = GenericJobOperator(task_id="train", image="i", execution_timeout=timedelta(hours=2))
    op._hook = RecordingHook()
    job: dict[str, Any] = {"metadata": {"name": "j"}}
    op._mark_deadline({"ti": ti()}, job, None)
    assert job["metadata"]["annotations"] == {overrun.DEADLINE: "2026-12-02T12:00:00Z",
                                              overrun.DEADLINE_SOURCE: "the task's execution_timeout"}  # fmt: skip
    current = {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml", "uid": "u", "annotations": {}}}
    op._mark_deadline({"ti": ti()}, job, current)
    assert [c[0] for c in op._hook.calls] == ["patch"]
    assert op._hook.calls[0][2]["metadata"]["uid"] == "u"  # uid-guarded
    current["metadata"]["annotations"] = job["metadata"]["annotations"]
    op._mark_deadline({"ti": ti()}, job, current)
    assert len(op._hook.calls) == 1  # the same deadline: no write


def test_each_turn_is_said_once_and_the_callback_runs_once_per_try(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[PredictedOverrun] = []
    op = GenericJobOperator(task_id="train", image="i", on_predicted_overrun=lambda c, o: calls.append(o))
    context = {"ti": ti()}
    op._overrun_context = context
    op._overrun_seen(late_job())
    op._overrun_seen(late_job())  # the same turn
    op._overrun_seen(late_job(turn="2026-12-02T10:09:00Z", status="False"))  # back on schedule
    op._overrun_seen(late_job(turn="2026-12-02T10:20:00Z"))  # late again: said, no second callback
    out = capsys.readouterr().out
    said = [line.split("GenericJob j: ")[1].split(":")[0] for line in out.splitlines() if "GenericJob j: " in line]
    assert said == ["predicted to miss its deadline", "back on schedule", "predicted to miss its deadline"]
    assert len(calls) == 1
    assert calls[0].predicted_end == datetime(2026, 12, 2, 13, 5, tzinfo=timezone.utc)
    assert calls[0].deadline == datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)
    assert (calls[0].deadline_source, calls[0].job["uid"]) == ("the task's timeout", "u")


def test_a_failing_callback_does_not_fail_the_wait(capsys: pytest.CaptureFixture[str]) -> None:
    def boom(context: Any, o: Any) -> None:
        raise RuntimeError("pager down")

    op = GenericJobOperator(task_id="train", image="i", on_predicted_overrun=boom)
    op._overrun_seen(late_job(), {"ti": ti()})
    out = capsys.readouterr().out
    assert "on_predicted_overrun raised; the task goes on waiting for its job" in out
    assert "pager down" in out


def test_a_resume_for_the_callback_calls_it_and_defers_again_without_it(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[Any] = []
    op = GenericJobOperator(task_id="train", image="i", deferrable=True, on_predicted_overrun=lambda c, o: calls.append(o))
    op._hook = RecordingHook(late_job())
    op._hook.api_client = SimpleNamespace(configuration=SimpleNamespace(host="https://k"))
    deadline = "2026-12-02T12:00:00+00:00"
    with pytest.raises(TaskDeferred) as deferred:
        op.execute_complete({"ti": ti()}, event(PREDICTED_OVERRUN, deadline=deadline, overrun_key="k1"))
    assert len(calls) == 1
    assert "GenericJob j: m" in capsys.readouterr().out  # the trigger's line, said by the worker (its log lasts)
    policy = deferred.value.trigger.policy
    assert (policy.overrun_callback, policy.overrun_seen, policy.deadline) == (False, "k1", deadline)
    assert deferred.value.method_name == "execute_complete"


def test_the_trigger_resumes_only_with_a_callback_not_yet_called() -> None:
    op = GenericJobOperator(task_id="train", image="i", on_predicted_overrun=lambda c, o: None)
    ident = {"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u"}
    assert op._trigger(ident, None).policy.overrun_callback is True
    op._overrun_called = True
    assert op._trigger(ident, None).policy.overrun_callback is False
    assert GenericJobOperator(task_id="t", image="i")._trigger(ident, None).policy.overrun_callback is False


def test_the_callback_must_be_callable() -> None:
    with pytest.raises(ValueError, match="on_predicted_overrun must be callable"):
        GenericJobOperator(task_id="train", image="i", on_predicted_overrun="page me")


def test_a_refused_deadline_write_on_a_reattached_job_does_not_fail_the_try(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_t9k.k8s.errors import ApiError

    class Refusing(RecordingHook):
        def patch_job(self, kind: str, name: str, namespace: str, patch: Any) -> Any:
            raise ApiError(403, "Forbidden", "genericjobs is forbidden: may not patch")

    op = GenericJobOperator(task_id="train", image="i", execution_timeout=timedelta(hours=2))
    op._hook = Refusing()
    current = {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml", "uid": "u", "annotations": {}}}
    op._mark_deadline({"ti": ti()}, {"metadata": {}}, current)
    assert "could not write this try's deadline on GenericJob j" in capsys.readouterr().out
