"""Whether a running job is stalled: no progress reported for ``progressDeadlineSeconds``
(reconcile/stall.py: the clock, and the decision kept, acted on and cleared over passes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.stall import REASON, STALLED, clock, judge, pending, record_of, resolve, restarting

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.passstate import PassState


def stall(p: PassState) -> PassState:
    """A running job silent for its deadline: evidence, then a counted group restart where its
    restart policy and budget allow, else the job fails; a timer wakes the job at its deadline, so
    a job that reports costs no request. Not judged: a job without the field, before its first
    report, not Running (paused, queued, starting), in Debug mode, or ending in this pass."""
    limit = p.kind.progress_deadline(p.job)
    rec = record_of(p.sb)
    active = rec is not None and p.sb.is_true(STALLED)
    if rec is not None and active and (limit is None or (p.outcome is not None and p.outcome[1] != REASON)):
        why = "progressDeadlineSeconds was removed" if limit is None else f"the job ended ({p.outcome[0] if p.outcome else ''})"
        resolve(p, rec, "StallCleared", f"The stall since {rec['key']} is no longer watched: {why}.")
        return p
    if limit is None or p.outcome is not None or p.group_cause is not None or p.debug or p.sb.old_phase != "Running":
        return p
    c = clock(p.sb, p.observed)
    if c is None:  # never reported: never judged
        return p
    if rec is None or not active:
        return judge(p, c, limit)
    if "restartedAt" not in rec:
        return pending(p, rec, c, limit)
    return restarting(p, rec, c, limit)
