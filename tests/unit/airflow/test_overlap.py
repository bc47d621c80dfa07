"""overlap=: what a task does about the job of an earlier DAG run of it (api/overlap.py)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_t9k.api import overlap
from airflow_t9k.operators.kinds import GenericJobOperator

EARLIER = {"kind": "GenericJob", "name": "j", "namespace": "ns", "uid": "u1"}


def job(phase: str | None = "Running", uid: str = "u1", run: str = "scheduled__1", paused: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "GenericJob",
                           "metadata": {"name": "j", "namespace": "ns", "uid": uid, "annotations": {overlap.RUN_ID: run}},
                           "spec": {"runMode": {"pause": {"enabled": True}}} if paused else {}}  # fmt: skip
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


@pytest.mark.parametrize(
    ("mode", "found", "identity", "action"),
    [
        ("allow", job(), EARLIER, overlap.PROCEED),  # Airflow's own behaviour: never looks
        ("wait", job(), EARLIER, overlap.WAIT),
        ("skip", job(), EARLIER, overlap.SKIP),
        ("supersede", job(), EARLIER, overlap.SUPERSEDE),
        ("skip", job(None), EARLIER, overlap.SKIP),  # created, no phase yet: it will take the GPUs
        ("wait", job("Pending"), EARLIER, overlap.WAIT),
        ("skip", job("Succeeded"), EARLIER, overlap.PROCEED),
        ("supersede", job("Failed"), EARLIER, overlap.PROCEED),
        ("wait", None, EARLIER, overlap.PROCEED),  # deleted since
        ("skip", job(uid="u2"), EARLIER, overlap.PROCEED),  # another object took the name
        ("supersede", job(run="manual__now"), EARLIER, overlap.PROCEED),  # this run's own job
        ("wait", job(paused=True), EARLIER, overlap.PROCEED),  # paused: holds no pods
        ("skip", job(), None, overlap.PROCEED),  # no earlier run pushed an identity
    ],
)
def test_decide(mode: str, found: Any, identity: Any, action: str) -> None:
    decision = overlap.decide(mode, found, identity, "manual__now")
    assert decision.action == action
    if action != overlap.PROCEED:
        assert "GenericJob ns/j of run scheduled__1 is still" in decision.why


@pytest.mark.parametrize(
    ("value", "identity"),
    [
        ({**EARLIER, "server": "https://k"}, EARLIER),
        ({"kind": "GenericJob", "name": "j", "namespace": "ns"}, None),  # no uid: nothing to check the job against
        ({**EARLIER, "uid": 7}, None),
        ("j", None),
        (None, None),
        ([EARLIER], None),
    ],
)
def test_earlier_identity(value: Any, identity: Any) -> None:
    assert overlap.earlier_identity(value) == identity


def test_the_argument_is_checked() -> None:
    assert GenericJobOperator(task_id="t", image="i", overlap="wait").overlap == "wait"
    assert GenericJobOperator(task_id="t", image="i").overlap == "allow"
    with pytest.raises(ValueError, match="overlap must be one of"):
        GenericJobOperator(task_id="t", image="i", overlap="queue")


def test_the_wait_defers_on_the_earlier_job_without_acting_on_it_and_holds_an_early_event() -> None:
    from airflow.sdk.exceptions import TaskDeferred

    op = GenericJobOperator(task_id="t", image="i", overlap="wait", deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        op._defer_on_earlier({"ti": None}, EARLIER)
    trigger = deferred.value.trigger
    assert (trigger.job.name, trigger.job.uid) == ("j", "u1")
    assert trigger.policy.on_kill_action == "none"  # not this task's job: a kill leaves it alone
    assert (trigger.forwarding.stream_logs, trigger.forwarding.log_events) == (False, False)
    # The deferral's time: an event within [t9k] deferral_hold_seconds of it is held (apache/airflow#72716).
    assert trigger.forwarding.events_since is not None
    assert deferred.value.method_name == "execute_after_overlap"
