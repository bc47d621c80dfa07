"""Whether an Airflow retry can help a failed job: pure, used where the task ends.

A retry spends time and accelerators. It cannot help when the job's spec is invalid, when the
replica that failed first exited with a code the task (or the ExitCode restart policy) calls
permanent, or when the job cannot start (an image that does not exist, a missing Secret: see
``api/startup.py``); the task then fails without spending its retries (``AirflowFailException``).
Everything else is retried as Airflow normally does: a disruption, a lost node, a deadline,
a timeout, an exit code nobody called permanent.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_t9k.api.outcome import JobState

Obj = dict[str, Any]


def check_codes(codes: Collection[int] | None) -> frozenset[int] | None:
    """``permanent_exit_codes`` as given to an operator, checked."""
    if codes is None:
        return None
    if isinstance(codes, (str, bytes)) or not all(isinstance(c, int) and not isinstance(c, bool) and 0 < c < 256 for c in codes):
        raise ValueError(f"permanent_exit_codes must be exit codes (integers 1-255), got {codes!r}")
    return frozenset(codes)


def permanent(state: JobState, permanent_exit_codes: frozenset[int] | None = None) -> str | None:
    """Why retrying the task cannot help this failed job, or None when it may."""
    if state.reason == "InvalidSpec":
        return "the job's spec is invalid; a retry would submit it again unchanged"
    cause = state.root_cause or {}
    code = cause.get("exitCode")
    if not isinstance(code, int):
        return None  # no exit code to judge (e.g. it was never started, or the deadline passed)
    who = f"{cause.get('replica', 'a replica')} (the first replica to fail) exited with code {code}"
    if permanent_exit_codes is not None:
        return f"{who}, which this task's permanent_exit_codes call permanent" if code in permanent_exit_codes else None
    if cause.get("permanent"):
        return f"{who}, a permanent error under its ExitCode restart policy"
    return None
