"""Part of ``T9kJobOperator``: ``progress_deadline=``, the job's ``progressDeadlineSeconds`` (hang
detection: the controller's reconcile/stall.py; docs/progress.md, "Hang detection").

The field sits where the kind keeps it (``JobKind.progress_deadline_path``): ``spec.runPolicy``,
GenericJob's ``spec``. The task log and the T9k Job tab show a stall from the job's ``Stalled``
condition (``api/stall.py``)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_t9k.kinds.registry import KINDS
from airflow_t9k.operators.manifest import set_in_spec

Obj = dict[str, Any]


def deadline_seconds(value: Any) -> int | None:
    """``progress_deadline`` as whole seconds, at least 1 (a timedelta or a fraction rounded up);
    ValueError for anything else."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"progress_deadline must be a positive number of seconds or a timedelta, got {value!r}")
    return max(1, math.ceil(seconds))


def never_reports(kind: str, job: Obj) -> str | None:
    """Why a stall can never be judged for this job (no replica reports progress); None otherwise."""
    known = KINDS.get(kind)
    try:
        silent = known is not None and known.decisive_replica(job) is None
    except Exception:  # noqa: BLE001 - a spec the controller refuses says so itself, with its reason
        return None
    return (
        f"progress_deadline has no effect on a {kind}: no replica of it reports progress (docs/progress.md)" if silent else None
    )


class ProgressDeadlineMixin:
    """Puts ``progress_deadline`` in the job, where its kind keeps ``progressDeadlineSeconds``."""

    progress_deadline: int | None

    def _init_progress_deadline(self, value: Any) -> None:
        # Checked when the DAG is parsed: a bad value fails the DAG, not a run.
        self.progress_deadline = deadline_seconds(value)

    def _apply_progress_deadline(self, job: Obj) -> None:
        if self.progress_deadline is None:
            return
        kind = job["kind"]
        why = never_reports(kind, job)
        if why:
            raise AirflowException(why)
        path = KINDS[kind].progress_deadline_path if kind in KINDS else ("runPolicy", "progressDeadlineSeconds")
        set_in_spec(job, path, self.progress_deadline, "progress_deadline")
