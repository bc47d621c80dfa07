"""Status pieces: conditions (with stable transition times), replica summaries, aggregate."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow_t9k.controller.reconcile.observe import is_deleting, pod_phase
from airflow_t9k.kinds.base import deep

Obj = dict[str, Any]

# Replica phases: the five pod phases plus the two the seeds add.
REPLICA_PHASES = ("Creating", "Pending", "Running", "Succeeded", "Failed", "Unknown", "Deleted")
JOB_PHASES = ("Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown")
FINISHED = ("Succeeded", "Failed")


MESSAGE_LIMIT = 2048  # a condition message; the status object must stay writable whatever the input


def bounded(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    note = f"... (cut; {len(text)} characters in all)"
    if len(note) >= limit:
        return text[:limit]
    return text[: limit - len(note)] + note


def timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusBuilder:
    """Starts from the job's current status and records changes to it."""

    def __init__(self, old: Obj | None, now: datetime) -> None:
        self.old = deep(old or {})
        self.new: Obj = deep(old or {})
        self.now = now
        self.new.setdefault("conditions", [])

    def condition(self, type_: str) -> Obj | None:
        return next((c for c in self.new["conditions"] if c.get("type") == type_), None)

    def set_condition(self, type_: str, status: bool, reason: str, message: str) -> bool:
        """Set a condition; return True when its status flipped (or it is new)."""
        value = "True" if status else "False"
        message = bounded(message)
        current = self.condition(type_)
        if current is None:
            self.new["conditions"].append(
                {"type": type_, "status": value, "reason": reason, "message": message, "lastTransitionTime": timestamp(self.now)}
            )
            return True
        flipped = current.get("status") != value
        if flipped:
            current["lastTransitionTime"] = timestamp(self.now)
        current.update(status=value, reason=reason, message=message)
        return flipped

    def is_true(self, type_: str) -> bool:
        c = self.condition(type_)
        return bool(c and c.get("status") == "True")

    @property
    def old_phase(self) -> str | None:
        return self.old.get("phase")

    def set_phase(self, phase: str) -> None:
        self.new["phase"] = phase


RESULT_LIMIT = 4096  # the kubelet's own cap on a termination message


def container_summaries(pod: Obj | None, message: bool = False) -> list[Obj]:
    """One entry per container; with ``message``, a terminated container's termination message
    (the job's result, kept in status so it survives the pod's clean-up)."""
    out = []
    for cs in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "terminated" in state:
            t = state["terminated"] or {}
            entry: Obj = {"name": cs.get("name"), "state": "Terminated", "exitCode": t.get("exitCode")}
            if t.get("reason"):
                entry["reason"] = t["reason"]
            if t.get("finishedAt"):  # which replica failed first, also once its pod is cleaned up
                entry["finishedAt"] = t["finishedAt"]
            if message and t.get("message"):
                entry["message"] = bounded(str(t["message"]), RESULT_LIMIT)
        elif "running" in state:
            entry = {"name": cs.get("name"), "state": "Running"}
        else:
            entry = {"name": cs.get("name"), "state": "Waiting"}
            reason = (state.get("waiting") or {}).get("reason")
            if reason:
                entry["reason"] = reason
        out.append(entry)
    return out


def replica_phase(pod: Obj | None, creating: bool, deleted: bool) -> str:
    if pod is None:
        return "Creating" if creating else ("Deleted" if deleted else "Pending")
    if is_deleting(pod):
        return "Deleted"
    phase = pod_phase(pod)
    return phase if phase in REPLICA_PHASES else "Unknown"


def replica_entry(name: str, pod: Obj | None, phase: str, restarts: int, message: bool = False) -> Obj:
    meta = (pod or {}).get("metadata") or {}
    return {
        "name": name,
        "phase": phase,
        "uid": meta.get("uid", ""),
        "restartCount": restarts,
        "containers": container_summaries(pod, message),
    }


def aggregate(entries: list[Obj]) -> Obj:
    counts = {p.lower(): 0 for p in REPLICA_PHASES}
    for e in entries:
        counts[e["phase"].lower()] += 1
    return counts


def failure_detail(pod: Obj | None) -> str:
    """'exit code 137 (OOMKilled)', or the pod's own reason such as Evicted."""
    status = (pod or {}).get("status") or {}
    if status.get("reason"):
        return str(status["reason"])
    for cs in status.get("containerStatuses") or []:
        t = (cs.get("state") or {}).get("terminated")
        if t and t.get("exitCode", 0) != 0:
            reason = f" ({t['reason']})" if t.get("reason") else ""
            said = f": {bounded(str(t['message']).strip(), 300)}" if t.get("message") else ""  # often the exception
            return f"container {cs.get('name')} exit code {t.get('exitCode')}{reason}{said}"
    return "failed"
