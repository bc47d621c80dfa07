"""Merge patches that pause and resume a job on behalf of an Airflow task.

Each carries the uid the task recorded: a JSON merge patch whose ``metadata.uid`` differs
from the stored object's is refused by the API server (409), so a patch never reaches another
object that took the name. A pause is marked with ``PAUSED_BY``, so a retry resumes only a job
that a kill or timeout of an earlier try paused, never one a person paused.
"""

from __future__ import annotations

from typing import Any

PAUSED_BY = "airflow-t9k.io/paused-by"


def pause_patch(uid: str | None, by: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {PAUSED_BY: by}}
    if uid:
        meta["uid"] = uid
    return {"metadata": meta, "spec": {"runMode": {"pause": {"enabled": True}}}}


def resume_patch(uid: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {PAUSED_BY: None}}
    if uid:
        meta["uid"] = uid
    return {"metadata": meta, "spec": {"runMode": {"pause": {"enabled": False}}}}


def paused_by_task(job: dict[str, Any]) -> bool:
    """Paused now, and by a task's kill or timeout (not by hand)."""
    pause = ((job.get("spec") or {}).get("runMode") or {}).get("pause") or {}
    return bool(pause.get("enabled")) and bool(((job.get("metadata") or {}).get("annotations") or {}).get(PAUSED_BY))
