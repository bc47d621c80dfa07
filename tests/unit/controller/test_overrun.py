"""A deadline miss seen coming (reconcile/overrun.py, issue 48 item 4): the ETA against the deadline
the operator wrote on the job, one turn at a time."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_t9k.controller.reconcile.actions import Plan
from airflow_t9k.controller.reconcile.overrun import CONDITION, DEADLINE, DEADLINE_SOURCE, with_overrun

UPDATED = "2026-12-02T10:00:00Z"


def job(deadline: str | None = "2026-12-02T11:00:00Z", source: str | None = "execution_timeout") -> dict[str, Any]:
    annotations = {**({DEADLINE: deadline} if deadline else {}), **({DEADLINE_SOURCE: source} if source else {})}
    return {"metadata": {"name": "j", "annotations": annotations}}


def status(eta: Any = 7200, phase: str = "Running", condition: str | None = None) -> dict[str, Any]:
    progress = {"updated": UPDATED, **({"etaSeconds": eta, "eta": "2h"} if eta is not None else {})}
    conditions = [{"type": CONDITION, "status": condition, "reason": "x", "message": "y"}] if condition else []
    return {"phase": phase, "progress": progress, "conditions": [{"type": "Running", "status": "True"}, *conditions]}


def turned(plan: Plan) -> tuple[str | None, list[str]]:
    cond = next((c for c in plan.status.get("conditions") or [] if c["type"] == CONDITION), None)
    return (cond or {}).get("status"), [e.reason for e in plan.events]


@pytest.mark.parametrize(
    ("the_job", "the_status", "expected"),
    [
        (job(), status(7200), ("True", [CONDITION])),  # ends 12:00, deadline 11:00
        (job(), status(1800), (None, [])),  # ends 10:30: on schedule, nothing was late, nothing said
        (job(), status(7200, condition="True"), ("True", [])),  # still late: no second Event
        (job(), status(1800, condition="True"), ("False", [])),  # back on schedule
        (job(), status(7200, condition="False"), ("True", [CONDITION])),  # late again: a new turn
        (job(), status(None), (None, [])),  # no ETA: never judged
        (job(), status(7200, phase="Succeeded"), (None, [])),  # ended: nothing to predict
        (job(None), status(7200), (None, [])),  # no deadline on the job
        (job("tomorrow"), status(7200), (None, [])),  # not a time
        (job("2026-12-02T11:00:00"), status(7200), (None, [])),  # no zone: not a time we can compare
        (job(), status(True), (None, [])),
        (job(), status(-5), (None, [])),
    ],
)
def test_turns(the_job: dict[str, Any], the_status: dict[str, Any], expected: tuple[Any, list[str]]) -> None:
    assert turned(with_overrun(the_job, Plan(status=the_status))) == expected


def test_the_message_says_when_and_by_how_much() -> None:
    plan = with_overrun(job(source="the task's execution_timeout"), Plan(status=status(7200)))
    message = plan.events[0].message
    assert message == ("at its ETA (2h) the job ends about 2026-12-02T12:00:00Z, 1h after the task's execution_timeout "
                       "(2026-12-02T11:00:00Z)")  # fmt: skip
    cond = next(c for c in plan.status["conditions"] if c["type"] == CONDITION)
    assert cond["lastTransitionTime"] == UPDATED
    assert plan.events[0].type == "Warning"


def test_a_long_source_is_bounded() -> None:
    plan = with_overrun(job(source="x" * 5000), Plan(status=status(7200)))
    assert len(plan.events[0].message) < 1200
