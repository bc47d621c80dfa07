"""Whether a later try of a task takes the job an earlier try ran, or runs the job anew: pure.

Airflow counts tries across retries and Clears alike; what tells them apart is the *series* a try
belongs to. A Clear starts a new series (Airflow sets ``max_tries = try_number + retries``), a
retry stays in its series, so the first try of the current series is ``max_tries - retries + 1``
(Airflow's own arithmetic, ``RuntimeTaskInstance.get_first_reschedule_date``).

- A job that **succeeded** is never trained again within its series: a retry there (the try
  failed after the job succeeded: an XCom backend error, a worker lost, a scheduler that failed
  the resumed try, apache/airflow#72716) delivers that job's result again. The try that delivered
  it marks it ``delivered-by-try`` last; only a try of a *later* series (a Clear) runs the job anew.
  A succeeded job no try delivered is delivered by whichever try finds it.
- A job that **failed** is marked ``consumed-by-try`` by the try that saw it fail; a later try
  runs the job anew (a retry after a failure is what retries are for).
- A job that still runs (or is paused) is reattached to, unless a Clear changed what the task
  renders: a try of a later series than the job's takes it only when the job it renders now has the
  digest the job was submitted with (``api/specdigest.py``). Otherwise it ends the old job as
  ``on_kill_action`` says and runs the job anew (``REPLACE``); an ended job of another spec stays
  and the job runs anew beside it. A job without a digest (an older version submitted it) counts
  as the same. Retries within a series reattach whatever the DAG renders now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from airflow_t9k.api.outcome import interpret

Obj = dict[str, Any]
CONSUMED_BY = "airflow-t9k.io/consumed-by-try"  # the try that saw the job fail (or, before, end)
DELIVERED_BY = "airflow-t9k.io/delivered-by-try"  # the try that delivered its success, written last
SUBMISSION = "airflow-t9k.io/submission"  # the nonce the task recorded before it created the job
TRY_LABEL = "airflow-t9k.io/try-number"  # the try that submitted the job (a label; operators/job.py)
MAX_RERUN_NAMES = 20  # candidate names one try tries before it gives up (``<name>-t<try>-<n>``)


def first_try(try_number: int, max_tries: Any, retries: Any) -> int:
    """The first try of the series ``try_number`` belongs to; ``try_number`` itself when Airflow
    does not say (every try then counts as a new series, which errs towards running anew)."""
    if isinstance(max_tries, bool) or not isinstance(max_tries, int) or isinstance(retries, bool) or not isinstance(retries, int):
        return try_number
    return max(1, min(try_number, max_tries - retries + 1))


def _mark(job: Obj, key: str) -> int | None:
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(key)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def taken_by(job: Obj) -> int | None:
    """The try that took the job's outcome (delivered its success, or consumed its failure); a
    success an earlier version marked ``consumed-by-try`` counts as delivered."""
    delivered = _mark(job, DELIVERED_BY)
    return delivered if delivered is not None else _mark(job, CONSUMED_BY)


def take_again(job: Obj, series_start: int) -> tuple[bool, str]:
    """(whether a try whose series started at ``series_start`` takes ``job``, why)."""
    state = interpret(job)
    if not state.terminal:
        return True, "it still runs"
    taker = taken_by(job)
    if state.succeeded:
        if taker is None:
            return True, "it succeeded and no try has delivered its result yet"
        if taker >= series_start:
            return True, f"it succeeded and try {taker}, of this series of retries, delivered it; a retry never trains again"
        return False, f"it succeeded and try {taker} delivered it before the task was cleared"
    if taker is None:
        return True, "it ended and no try has consumed its result yet"
    return False, f"it failed and try {taker} consumed that failure"


TAKE, ANEW, REPLACE = "take", "anew", "replace"


@dataclass(frozen=True)
class Reuse:
    """What a try does with the job an earlier try recorded: ``TAKE`` it (reattach, resume, or
    deliver its end), run the job ``ANEW`` beside it, or end it (``on_kill_action``) and run anew
    (``REPLACE``); ``why`` for the task log; ``note``, a line the log adds (a job without digest)."""

    action: str
    why: str
    note: str | None = None


def submitted_by(job: Obj) -> int | None:
    """The try that submitted ``job`` (its ``try-number`` label), None when it does not say."""
    value = ((job.get("metadata") or {}).get("labels") or {}).get(TRY_LABEL)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def in_series(job: Obj, series_start: int, taken_by_tries: Iterable[int] = ()) -> bool:
    """Whether a try of the series that started at ``series_start`` submitted ``job`` or took it
    already (``taken_by_tries``: the tries the task recorded running it, ``api/attempts.py``)."""
    submitter = submitted_by(job)
    return (submitter is not None and submitter >= series_start) or any(t >= series_start for t in taken_by_tries)


def reuse(job: Obj, series_start: int, digest: str | None = None, same_series: bool = True) -> Reuse:
    """What a try whose series started at ``series_start`` and which renders a job of ``digest``
    does with ``job`` (``same_series``: ``in_series``). Retries within a series follow
    ``take_again``; a later series (a Clear) compares digests first."""
    from airflow_t9k.api import specdigest  # it imports this module's marks

    note = None
    if not same_series and digest:
        theirs = specdigest.recorded(job)
        if theirs is None:
            note = ("it has no spec digest (an older version of airflow-t9k submitted it): taken as the job the "
                    "task renders now")  # fmt: skip
        elif not specdigest.comparable(theirs) or not specdigest.comparable(digest):
            note = (
                f"its spec digest is of another version of airflow-t9k ({theirs[:16]}...): taken as the job the task renders now"
            )
        elif theirs != digest:
            state = interpret(job)
            changed = "the task was cleared since, and the job it renders now differs from the one submitted"
            if not state.terminal:
                pause = ((job.get("spec") or {}).get("runMode") or {}).get("pause") or {}
                paused = "is paused" if isinstance(pause, dict) and pause.get("enabled") else "still runs"
                return Reuse(REPLACE, f"it {paused}, but {changed}")
            return Reuse(ANEW, f"it ended ({state.phase}), and {changed}")
        else:
            note = "the task was cleared since, and the job it renders now is the same (its spec digest)"
    take, why = take_again(job, series_start)
    return Reuse(TAKE if take else ANEW, why, note if take else None)


def rerun_names(base: str, try_number: int) -> list[str]:
    """Names a try may submit its job under, in order: the task's own, then this try's re-run
    names, ``<base>-t<try>`` and ``<base>-t<try>-2``... (a run id reused, as ``airflow dags test``
    with a fixed date does, finds the earlier ones taken)."""
    rerun = f"{base}-t{try_number}"
    return [base, rerun, *(f"{rerun}-{n}" for n in range(2, MAX_RERUN_NAMES))]
