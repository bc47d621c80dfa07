"""The task-log line for a job's ``Stalled`` condition: hang detection, decided by the controller
(controller/reconcile/stall.py; docs/progress.md, "Hang detection"). Pure: the worker's wait and
the trigger print it, each change once."""

from __future__ import annotations

from typing import Any

from airflow_t9k.api.outcome import condition_note

Obj = dict[str, Any]


def note(job: Obj | None) -> tuple[str, str, bool] | None:
    """(key, line, stalled) of the job's ``Stalled`` condition, the key new at each change (the
    decision, the restart, the end of the stall); None when the job has never stalled."""
    return condition_note(job, "Stalled", "stalled: ", "no longer stalled: ")
