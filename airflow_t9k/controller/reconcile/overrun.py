"""A deadline miss seen coming (docs/progress.md, "A deadline miss seen coming"). Pure.

The operator writes the time its task must end by on the job (``airflow-t9k.io/deadline``: the
try's ``execution_timeout`` or ``timeout``, whichever comes first, and the DAG run's deadline
alert where it has a fixed time), and what it is (``airflow-t9k.io/deadline-source``). While the
job runs with an ETA (``status.progress``), the job is predicted to end at the write's time plus
the ETA. Past the deadline: condition ``PredictedOverrun`` true and a Warning Event, once per
turn; back before it: the condition false. Nothing without an ETA or a deadline, and nothing once
the job has ended. No pass of its own: this runs in the pass that wrote the ETA, so it adds no
request (an annotation anyone may write on their own job only changes that job's condition).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from airflow_t9k.api.overrun import CONDITION, DEADLINE, DEADLINE_SOURCE, parse_time, predicted_end
from airflow_t9k.controller.reconcile.actions import Emit, Plan
from airflow_t9k.controller.reconcile.reporting import duration
from airflow_t9k.controller.reconcile.status import bounded, timestamp

Obj = dict[str, Any]
__all__ = ["CONDITION", "DEADLINE", "DEADLINE_SOURCE", "judge", "predicted_end", "with_overrun"]


def judge(job: Obj, status: Obj) -> tuple[bool, str] | None:
    """(late, what to say), or None when there is nothing to judge."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    deadline = parse_time(annotations.get(DEADLINE))
    end = predicted_end(status)
    if deadline is None or end is None:
        return None
    source = bounded(str(annotations.get(DEADLINE_SOURCE) or "the task's deadline"), 200)
    eta = (status.get("progress") or {}).get("eta") or duration(float(status["progress"]["etaSeconds"]))
    gap = (end - deadline).total_seconds()
    if gap > 0:
        return True, (f"at its ETA ({eta}) the job ends about {timestamp(end)}, {duration(gap)} after {source} "
                      f"({timestamp(deadline)})")  # fmt: skip
    return False, f"at its ETA ({eta}) the job ends about {timestamp(end)}, {duration(-gap)} before {source}"


def with_overrun(job: Obj, plan: Plan) -> Plan:
    """The plan with ``PredictedOverrun`` set where the ETA it writes says so."""
    verdict = judge(job, plan.status)
    if verdict is None:
        return plan
    late, message = verdict
    conditions = [c for c in plan.status.get("conditions") or [] if isinstance(c, dict)]
    current = next((c for c in conditions if c.get("type") == CONDITION), None)
    was_late = current is not None and current.get("status") == "True"
    if late == was_late and (current is not None or not late):
        return plan  # no turn: the message is not rewritten on every ETA
    stamp = (plan.status.get("progress") or {}).get("updated")
    entry = {"type": CONDITION, "status": "True" if late else "False", "reason": CONDITION if late else "OnSchedule",
             "message": bounded(message), "lastTransitionTime": stamp}  # fmt: skip
    status = {**plan.status, "conditions": [c for c in conditions if c is not current] + [entry]}
    events = plan.events + ((Emit("Warning", CONDITION, bounded(message)),) if late else ())
    return replace(plan, status=status, events=events)
