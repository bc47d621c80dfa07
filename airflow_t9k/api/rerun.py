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
- A job that still runs is reattached to.
"""

from __future__ import annotations

from typing import Any

from airflow_t9k.api.outcome import interpret

Obj = dict[str, Any]
CONSUMED_BY = "airflow-t9k.io/consumed-by-try"  # the try that saw the job fail (or, before, end)
DELIVERED_BY = "airflow-t9k.io/delivered-by-try"  # the try that delivered its success, written last
SUBMISSION = "airflow-t9k.io/submission"  # the nonce the task recorded before it created the job
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


def rerun_names(base: str, try_number: int) -> list[str]:
    """Names a try may submit its job under, in order: the task's own, then this try's re-run
    names, ``<base>-t<try>`` and ``<base>-t<try>-2``... (a run id reused, as ``airflow dags test``
    with a fixed date does, finds the earlier ones taken)."""
    rerun = f"{base}-t{try_number}"
    return [base, rerun, *(f"{rerun}-{n}" for n in range(2, MAX_RERUN_NAMES))]
