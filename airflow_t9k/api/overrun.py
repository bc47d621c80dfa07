"""A deadline miss seen coming: what the operator writes on the job, and how the waits read the
controller's verdict (controller/reconcile/overrun.py; docs/progress.md, "A deadline miss seen
coming"). Pure.

The operator writes the time the try must end by (``DEADLINE``, RFC 3339) and what that time is
(``DEADLINE_SOURCE``): the earliest of the try's ``timeout``, its ``execution_timeout`` and the DAG
run's deadline alerts whose time is known when the try starts (a fixed time, or an interval after
the run's logical date). The controller, which computes the ETA, sets condition
``PredictedOverrun`` when the ETA ends past it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_t9k.api.outcome import condition_note
from airflow_t9k.api.outcome import parse_time as parse_time  # the controller's overrun step reads it from here

Obj = dict[str, Any]
DEADLINE = "airflow-t9k.io/deadline"
DEADLINE_SOURCE = "airflow-t9k.io/deadline-source"
CONDITION = "PredictedOverrun"
PREDICTED_OVERRUN = "predicted_overrun"  # the trigger's event that resumes a task for its on_predicted_overrun


def predicted_end(status: Obj) -> datetime | None:
    """When the running job's ETA says it ends: the progress write's time plus ``etaSeconds``."""
    progress = status.get("progress")
    if status.get("phase") != "Running" or not isinstance(progress, dict):
        return None
    eta, updated = progress.get("etaSeconds"), parse_time(progress.get("updated"))
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or eta < 0 or updated is None:
        return None
    return updated + timedelta(seconds=float(eta))


def stamp(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def earliest(candidates: list[tuple[datetime | None, str]]) -> tuple[datetime, str] | None:
    """The first of the deadlines that are known (aware datetimes), with what it is."""
    known = [(when, what) for when, what in candidates if isinstance(when, datetime) and when.tzinfo is not None]
    return min(known, key=lambda c: c[0]) if known else None


def marks(deadline: tuple[datetime, str] | None) -> Obj:
    return {} if deadline is None else {DEADLINE: stamp(deadline[0]), DEADLINE_SOURCE: deadline[1]}


def alert_deadline(alert: Any, dag_run: Any) -> tuple[datetime | None, str]:
    """When one of the DAG's ``DeadlineAlert``s falls for this run, where that is known on the worker:
    a fixed time, or an interval after the run's logical date. None otherwise: the time the run was
    queued (the Task SDK's DAG run does not carry it), an average of earlier runs, a custom
    reference, a variable interval."""
    reference, interval = getattr(alert, "reference", None), getattr(alert, "interval", None)
    name = getattr(alert, "name", None)
    what = f"the DAG run's deadline alert {name!r}" if name else "the DAG run's deadline alert"
    if not isinstance(interval, timedelta):
        return None, what
    kind = type(reference).__name__
    base: Any = None
    if kind == "FixedDatetimeDeadline":
        base = getattr(reference, "_datetime", None)
    elif kind == "DagRunLogicalDateDeadline":
        base = getattr(dag_run, "logical_date", None)
    if not isinstance(base, datetime):
        return None, what
    base = base if base.tzinfo is not None else base.replace(tzinfo=timezone.utc)
    return base + interval, what


def note(job: Obj | None) -> tuple[str, str, bool] | None:
    """(key, line, late) of the job's ``PredictedOverrun`` condition, the key new at each turn; None
    when the controller never judged it late."""
    return condition_note(job, CONDITION, "predicted to miss its deadline: ", "back on schedule: ")
