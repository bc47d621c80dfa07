"""Read a job's status the same way everywhere: the operator, the trigger and the sensor.

T9k jobs report ``status.phase``; AscendJob reports only conditions. Both come out as one
``JobState``, so callers never look at raw status fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_t9k.api.progress import describe, metrics_of

Obj = dict[str, Any]

SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINAL_PHASES = (SUCCEEDED, FAILED)


@dataclass(frozen=True)
class JobState:
    phase: str | None
    message: str = ""
    reason: str = ""
    aggregate: dict[str, int] = field(default_factory=dict)
    failed_replicas: tuple[str, ...] = ()
    replica_pods: tuple[str, ...] = ()
    replica_failure: str = ""  # e.g. "Replicas failed: j-worker-1: container main exit code 137 (OOMKilled)"
    result_message: str | None = None  # the decisive replica's termination message, as the controller recorded it
    # The replica that failed first (status.rootCause): replica, exitCode, detail, finishedAt, permanent.
    root_cause: dict[str, Any] = field(default_factory=dict)
    # What the job's pods used (status.usage, controller/reconcile/usage.py), as ``usage_of`` reads it.
    usage: dict[str, Any] = field(default_factory=dict)
    # The last progress and metrics the reporting replica printed (status.progress, docs/progress.md),
    # as XCom ``metrics`` holds them, and as one line of text.
    metrics: dict[str, Any] = field(default_factory=dict)
    progress: str = ""
    restarts: int = 0  # entries of status.restartHistory (bounded by the controller): restarts and replacements

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def succeeded(self) -> bool:
        return self.phase == SUCCEEDED

    @property
    def replicas_read_at_end(self) -> tuple[str, ...]:
        """The replicas whose logs both waits read once more when the job ended: every one of a
        succeeded job; of a failed one, those that did not fail (the failed-logs report prints
        the failed ones under their own headers)."""
        return tuple(p for p in self.replica_pods if self.succeeded or p not in self.failed_replicas)

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.aggregate.items() if v)
        text = f"phase {self.phase or 'unknown'}"
        if counts:
            text += f" ({counts})"
        if self.message:
            text += f": {self.message}"
        return text

    def as_dict(self) -> Obj:
        return {
            "phase": self.phase,
            "message": self.message,
            "reason": self.reason,
            "aggregate": dict(self.aggregate),
            "failed_replicas": list(self.failed_replicas),
            "replica_failure": self.replica_failure,
            "result_message": self.result_message,
            "root_cause": dict(self.root_cause),
            "usage": dict(self.usage),
            "metrics": dict(self.metrics),
            "progress": self.progress,
            "restarts": self.restarts,
        }


def condition_note(job: Obj | None, type_: str, when_true: str, when_false: str) -> tuple[str, str, bool] | None:
    """(key, line, true) for a task-log line of the job's condition ``type_``, the key new at each
    change of it (status, time or message), so the waits print each change once; None when the job
    never had it."""
    c = condition(((job or {}).get("status") or {}), type_)
    if not c:
        return None
    true = c.get("status") == "True"
    message = str(c.get("message") or c.get("reason") or "")
    key = f"{c.get('status')}|{c.get('lastTransitionTime')}|{message}"
    return key, (when_true if true else when_false) + message, true


def condition(status: Obj, type_: str) -> Obj | None:
    """The condition of that type in a status (a job's, or a batch Job's), True or not."""
    return next((c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == type_), None)


def true_condition(status: Obj, type_: str) -> Obj | None:
    c = condition(status, type_)
    return c if c and c.get("status") == "True" else None


def interpret(job: Obj | None) -> JobState:
    """The state of a job as read from the API (None: the job does not exist)."""
    if job is None:
        return JobState(None, message="the job does not exist")
    status: Obj = job.get("status") or {}
    phase = status.get("phase")
    if phase is None:  # condition-only kinds (AscendJob)
        if true_condition(status, "Failed"):
            phase = FAILED
        elif true_condition(status, "Succeeded") or true_condition(status, "Completed"):
            phase = SUCCEEDED
        elif true_condition(status, "Running"):
            phase = "Running"
        elif true_condition(status, "Restarting"):
            phase = "Restarting"
        elif true_condition(status, "Created"):
            phase = "Created"
    decisive = None
    if phase == FAILED:
        decisive = true_condition(status, "Failed")
    elif phase == SUCCEEDED:
        decisive = true_condition(status, "Completed") or true_condition(status, "Succeeded")
    elif phase == "Paused":
        decisive = true_condition(status, "Paused")
    failed, pods = [], []
    result = None
    for task in status.get("tasks") or []:
        for replica in task.get("status") or []:
            pods.append(replica.get("name"))
            if replica.get("phase") == FAILED:
                failed.append(replica.get("name"))
            for c in replica.get("containers") or []:
                if result is None and c.get("message"):
                    result = str(c["message"])
    return JobState(
        phase=phase,
        message=str((decisive or {}).get("message") or ""),
        reason=str((decisive or {}).get("reason") or ""),
        aggregate={k: int(v) for k, v in (status.get("aggregate") or {}).items() if isinstance(v, int)},
        failed_replicas=tuple(n for n in failed if n),
        replica_pods=tuple(n for n in pods if n),
        replica_failure=str((true_condition(status, "ReplicaFailure") or {}).get("message") or ""),
        result_message=result,
        root_cause=dict(status["rootCause"]) if isinstance(status.get("rootCause"), dict) else {},
        usage=usage_of(status, (job.get("metadata") or {}).get("creationTimestamp")),
        metrics=metrics_of(status),
        progress=describe(status.get("progress")),
        restarts=len(status["restartHistory"]) if isinstance(status.get("restartHistory"), list) else 0,
    )


def usage_of(status: Obj | None, created: Any = None) -> Obj:
    """The totals of ``status.usage`` (docs/usage.md), for XCom, the UI and metrics; {} when nothing ran.

    accelerator_seconds and wasted_accelerator_seconds per resource name, cpu_seconds, runs,
    accelerator_hours (all resources together), and wall_seconds once the job has ended; with the
    job's ``created`` (its creationTimestamp), queue_seconds: from then to its ``startTime``, the
    time it waited to be admitted (a queue, a quota, a template).
    """
    usage = (status or {}).get("usage")
    if not isinstance(usage, dict) or not usage:
        return {}

    def per_resource(value: Any) -> dict[str, float]:
        return {str(k): v for k, v in value.items() if isinstance(v, (int, float))} if isinstance(value, dict) else {}

    out: Obj = {
        "accelerator_seconds": per_resource(usage.get("accelerators")),
        "wasted_accelerator_seconds": per_resource(usage.get("wasted")),
        "cpu_seconds": usage.get("cpuSeconds", 0),
        "runs": usage.get("runs", 0),
    }
    if "wallSeconds" in usage:
        out["wall_seconds"] = usage["wallSeconds"]
    out["accelerator_hours"] = round(sum(out["accelerator_seconds"].values()) / 3600, 4)
    queued = _between(created, (status or {}).get("startTime"))
    if queued is not None:
        out["queue_seconds"] = queued
    return out


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time with its zone (as the API server writes them); None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _between(start: Any, end: Any) -> int | None:
    """Whole seconds from one RFC 3339 stamp to a later one (never negative); None unless both are stamps."""
    first, last = parse_time(start), parse_time(end)
    return None if first is None or last is None else max(0, round((last - first).total_seconds()))


def describe_usage(usage: Obj) -> str:
    """'nvidia.com/gpu 0.05 h (0.02 h wasted by restarts), 180 cpu-s, wall 103 s' for a task log."""
    wasted = usage.get("wasted_accelerator_seconds") or {}
    parts = [f"{name} {float(sec) / 3600:.4g} h"
             + (f" ({float(wasted[name]) / 3600:.4g} h wasted by restarts)" if wasted.get(name) else "")
             for name, sec in (usage.get("accelerator_seconds") or {}).items()]  # fmt: skip
    parts.append(f"{usage.get('cpu_seconds', 0)} cpu-s")
    if "wall_seconds" in usage:
        parts.append(f"wall {usage['wall_seconds']} s")
    return ", ".join(parts)
