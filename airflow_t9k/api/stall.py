"""The task-log line for a job's ``Stalled`` condition: hang detection, decided by the controller
(controller/reconcile/stall.py; docs/progress.md, "Hang detection"). Pure: the worker's wait and
the trigger print it, each change once."""

from __future__ import annotations

from typing import Any

from airflow_t9k.api.outcome import condition

Obj = dict[str, Any]


def note(job: Obj | None) -> tuple[str, str, bool] | None:
    """(key, line, stalled) of the job's ``Stalled`` condition, the key new at each change (the
    decision, the restart, the end of the stall); None when the job has never stalled."""
    c = condition(((job or {}).get("status") or {}), "Stalled")
    if not c:
        return None
    stalled = c.get("status") == "True"
    message = str(c.get("message") or c.get("reason") or "")
    key = f"{c.get('status')}|{c.get('lastTransitionTime')}|{message}"
    return key, ("stalled: " if stalled else "no longer stalled: ") + message, stalled
