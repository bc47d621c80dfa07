"""Whether an Airflow retry can help a failed job: pure, used where the task ends.

A retry spends time and accelerators, but ``retries=`` is the DAG author's call, so the task
fails without spending its retries (``AirflowFailException``) only where a retry surely cannot
help: the job's spec is invalid, a replica's image name is invalid (``InvalidImageName``), or
the replica that failed first exited with a code the DAG author listed in
``permanent_exit_codes``. Everything else is retried as Airflow normally does: any other exit
code (1, a Python exception; 134, an NCCL abort: whatever the job's ``ExitCode`` restart policy
thinks of it, which only decides restarts inside the job), a disruption, a lost node, a
deadline, a timeout, and an image that could not be pulled (a registry's rate limit passes).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_t9k.api.outcome import JobState

Obj = dict[str, Any]


def check_codes(codes: Collection[int] | None, name: str = "permanent_exit_codes") -> frozenset[int] | None:
    """``permanent_exit_codes`` (or ``skip_on_exit_code``) as given to an operator, checked."""
    if codes is None:
        return None
    if isinstance(codes, (str, bytes)) or not all(isinstance(c, int) and not isinstance(c, bool) and 0 < c < 256 for c in codes):
        raise ValueError(f"{name} must be exit codes (integers 1-255), got {codes!r}")
    return frozenset(codes)


def permanent(state: JobState, permanent_exit_codes: frozenset[int] | None = None) -> str | None:
    """Why retrying the task cannot help this failed job, or None when it may."""
    if state.reason == "InvalidSpec":
        return "the job's spec is invalid; a retry would submit it again unchanged"
    cause = state.root_cause or {}
    code = cause.get("exitCode")
    if permanent_exit_codes is None or isinstance(code, bool) or not isinstance(code, int):
        return None  # opt-in: nobody called a code permanent, or there is none to judge
    if code in permanent_exit_codes:
        who = f"{cause.get('replica', 'a replica')} (the first replica to fail) exited with code {code}"
        return f"{who}, which this task's permanent_exit_codes call permanent"
    return None


# Waiting reasons no retry can fix; an image that could not be pulled may be there next time.
PERMANENT_WAITING = ("InvalidImageName",)


def startup_permanent(waiting: dict[str, str] | None, message: str = "") -> str | None:
    """Why retrying cannot help a job that cannot start (``waiting``: replica -> its waiting
    reason), or None when a retry may (``ErrImagePull``, ``ImagePullBackOff``: a registry's rate
    limit or outage; ``CreateContainerConfigError``: a Secret or ConfigMap created meanwhile).
    An event without ``waiting`` (an earlier version's) is judged by its message."""
    reasons = set((waiting or {}).values()) if waiting else {r for r in PERMANENT_WAITING if r in message}
    bad = sorted(reasons & set(PERMANENT_WAITING))
    if bad:
        return f"a replica's image name is invalid ({', '.join(bad)}); a retry would submit it again unchanged"
    return None
