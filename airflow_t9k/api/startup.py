"""When a job counts as not started, since when, and when it never will: pure, shared by the
operator's worker-side wait and the trigger.

- The startup clock runs from the job's creation, its admission from a Kueue queue, or its
  last resume, whichever is latest: a resumed job is ``Resuming`` until its replicas run
  again, and ``startup_timeout`` bounds that as it bounds the first start.
- Some waiting reasons do not pass by waiting (a wrong image name, a missing Secret in the pod
  spec): a replica that has shown one of them for ``startup_error_grace`` seconds fails the
  task at once instead of after ``startup_timeout``. The grace lets a registry hiccup (one
  ``ErrImagePull`` that the kubelet's next try fixes) pass.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from airflow_t9k.api import queueing
from airflow_t9k.api.outcome import condition, interpret

Obj = dict[str, Any]

# Phases of a job none of whose replicas runs yet (``Resuming``: not since its last resume).
NOT_STARTED = (None, "Pending", "Created", "Resuming")
DEFAULT_STARTUP_TIMEOUT = 3600.0  # an hour: long enough to wait for GPUs, short of forever
DEFAULT_STARTUP_ERROR_GRACE = 120.0
# Waiting reasons that further waiting does not fix (ImagePullBackOff is ErrImagePull retried).
FATAL_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError")


def _time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def resumed_at(job: Obj) -> float | None:
    """When the job was last resumed (its ``Paused`` condition turned False), if ever."""
    c = condition((job or {}).get("status") or {}, "Paused")
    if c and c.get("status") == "False":
        return _time(c.get("lastTransitionTime"))
    return None


def startup_start(job: Obj) -> float | None:
    starts = [t for t in (queueing.startup_start(job), resumed_at(job)) if t is not None]
    return max(starts) if starts else None


def startup_remaining(job: Obj, startup_timeout: float | None, now: float | None = None) -> float | None:
    """Seconds left for a job that has not started (or not since its resume) to get running;
    None when it runs, waits in a queue (that is queue_timeout's), or there is no limit."""
    if not startup_timeout or interpret(job).phase not in NOT_STARTED or queueing.waiting(job):
        return None
    start = startup_start(job)
    now = time.time() if now is None else now
    return (start if start is not None else now) + float(startup_timeout) - now


def startup_failure(kind: str, namespace: str, name: str, startup_timeout: float | None, reason: str) -> str:
    return f"{kind} {namespace}/{name} did not start within startup_timeout={float(startup_timeout or 0):g}s: {reason}"


def fatal_waiting(job: Obj | None) -> dict[str, str]:
    """Replica pod -> the waiting reason that waiting does not fix, for a job not started."""
    if interpret(job).phase not in NOT_STARTED:
        return {}
    out = {}
    for task in ((job or {}).get("status") or {}).get("tasks") or []:
        for replica in task.get("status") or []:
            for c in replica.get("containers") or []:
                if c.get("state") == "Waiting" and c.get("reason") in FATAL_WAITING and replica.get("name"):
                    out[str(replica["name"])] = str(c["reason"])
    return out


class StartupErrors:
    """Remembers since when each replica has shown a fatal waiting reason, for one wait.

    Only this wait's observations count: after a restart of the triggerer the grace starts
    again, which errs on the side of waiting."""

    def __init__(self, grace: float | None) -> None:
        self.grace = grace
        self.since: dict[str, float] = {}

    def observe(self, job: Obj | None, now: float) -> tuple[dict[str, str], float | None]:
        """(the replicas whose error outlasted the grace, seconds until the next one may), both
        empty/None when there is nothing to fail for or no grace is set (the check is off)."""
        if self.grace is None:
            return {}, None
        bad = fatal_waiting(job)
        self.since = {pod: self.since.get(pod, now) for pod in bad}
        due = {pod: reason for pod, reason in bad.items() if now - self.since[pod] >= self.grace}
        if due:
            return due, None
        pending = [self.since[pod] + self.grace - now for pod in bad]
        return {}, (min(pending) if pending else None)


def waiting_detail(pods: list[Obj], due: dict[str, str]) -> str:
    """The kubelet's own words for the replicas that cannot start (``Back-off pulling image
    "busybox:typo"``), from their pods' waiting containers."""
    out = []
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name") or "")
        if name not in due:
            continue
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in FATAL_WAITING:
                out.append(f"{name}: {waiting['reason']}: {waiting.get('message') or ''}".rstrip(": "))
    return "; ".join(out)


def startup_error(kind: str, namespace: str, name: str, grace: float | None, due: dict[str, str], detail: str) -> str:
    pods = ", ".join(f"{pod}: {reason}" for pod, reason in sorted(due.items()))
    return (f"{kind} {namespace}/{name} cannot start ({pods}, for {float(grace or 0):g}s, startup_error_grace): "
            f"{detail or 'no detail reported'}")  # fmt: skip
