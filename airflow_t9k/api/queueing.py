"""A job's queue, read and written the same way by the operators, the trigger and the sensor.

The controller reports Kueue's admission as the job's ``Admitted`` condition (T9k kinds and
AscendJob alike; docs/queueing.md): ``False`` while the job waits in its queue (the message is
Kueue's own), ``True`` once admitted. Time spent waiting is not startup time: the startup
clock runs from admission, and ``queue_timeout`` bounds the wait instead.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from airflow_t9k.api.outcome import condition

Obj = dict[str, Any]
ADMITTED = "Admitted"


def _time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def queue_of(job: Obj | None) -> str | None:
    spec = (job or {}).get("spec") or {}
    if (job or {}).get("kind") == "AscendJob":
        queue = (((spec.get("runPolicy") or {}).get("schedulingPolicy")) or {}).get("queue")
    else:
        sched = (spec.get("scheduler") or {}).get("t9kScheduler")
        # Seeds 001/003: t9kScheduler without a queue means queue "default" (as the controller reads it).
        queue = (sched.get("queue") or "default") if isinstance(sched, dict) else None
    return str(queue) if queue else None


def admission(job: Obj | None) -> Obj | None:
    return condition((job or {}).get("status") or {}, ADMITTED)


def waiting(job: Obj | None) -> bool:
    """In a queue: Kueue has not admitted the job (or evicted it)."""
    c = admission(job)
    return c is not None and bool(c) and c.get("status") != "True"


def note(job: Obj | None) -> str | None:
    """The task-log line for the job's place in its queue; None when no queue admits it."""
    c = admission(job)
    if not c:
        return None
    queue = queue_of(job) or "?"
    if c.get("status") == "True":
        return f"admitted from queue {queue}: {c.get('message') or ''}".rstrip(": ")
    return f"waiting in queue {queue}: {c.get('message') or c.get('reason') or ''}"


def startup_start(job: Obj) -> float | None:
    """When the startup clock starts: admission, for a job that went through a queue; else creation."""
    c = admission(job)
    if c and c.get("status") == "True":
        admitted = _time(c.get("lastTransitionTime"))
        if admitted is not None:
            return admitted
    return _time(job["metadata"].get("creationTimestamp"))


def queue_remaining(job: Obj | None, queue_timeout: float | None, now: float) -> float | None:
    """Seconds left for a job waiting in its queue, counted from when it started waiting
    (its creation, or its eviction); None when it is not waiting or there is no limit."""
    if not queue_timeout or not waiting(job):
        return None
    c = admission(job) or {}
    since = _time(c.get("lastTransitionTime")) or _time((job or {}).get("metadata", {}).get("creationTimestamp")) or now
    return since + float(queue_timeout) - now


def queue_failure(kind: str, namespace: str, name: str, job: Obj | None, queue_timeout: float | None) -> str:
    return (f"{kind} {namespace}/{name} was not admitted within queue_timeout={float(queue_timeout or 0):g}s: "
            f"{note(job) or 'waiting in its queue'}")  # fmt: skip


def with_queue(job: Obj, queue: str | None = None, priority: int | None = None, min_available: int | None = None,
               priority_class: str | None = None) -> Obj:  # fmt: skip
    """The manifest with the queue fields set: T9k ``spec.scheduler.t9kScheduler``, AscendJob
    ``spec.runPolicy.schedulingPolicy``. Fields left None keep what the manifest has."""
    if queue is None and priority is None and min_available is None and priority_class is None:
        return job
    out = copy.deepcopy(job)
    spec = out.setdefault("spec", {})
    if out.get("kind") == "AscendJob":
        if priority is not None:
            raise ValueError("an AscendJob's priority is a class: give priority_class= (a WorkloadPriorityClass or "
                             "PriorityClass name), not priority=")  # fmt: skip
        policy = spec.setdefault("runPolicy", {}).setdefault("schedulingPolicy", {})
        for key, value in (("queue", queue), ("minAvailable", min_available), ("priorityClass", priority_class)):
            if value is not None:
                policy[key] = value
        return out
    if min_available is not None or priority_class is not None:
        raise ValueError(
            f"min_available= and priority_class= are AscendJob's; a {out.get('kind')} takes queue_name= and priority="
        )
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ValueError(f"priority must be an integer, got {priority!r}")
    sched = spec.setdefault("scheduler", {}).setdefault("t9kScheduler", {})
    if queue is not None:
        sched["queue"] = str(queue)
    if priority is not None:
        sched["priority"] = priority
    return out
