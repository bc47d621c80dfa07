"""Finished jobs do not pile up: ``ttlSecondsAfterFinished`` seconds after a job ended, it is deleted.

The field is Kubeflow's run policy field (``spec.runPolicy.ttlSecondsAfterFinished``); GenericJob,
which has no runPolicy, keeps it in ``spec.ttlSecondsAfterFinished`` as batch/v1 Job does;
AscendJob ignores it (seed 002: "meaningless"). Where a kind keeps it: ``JobKind.ttl_path``.

When the job ended is the time its ``Completed`` or ``Failed`` condition turned true, written to
status by the pass that ended it: the decision rests on what is durable already, so it needs no
record of its own, and a pass repeated after a crash decides the same. Before the TTL the pass
asks to be woken then (``expire_in``, which ``seal`` folds into the plan's requeue, so no step
that ends the pass early can drop it): nothing polls. Once it has passed, the job is deleted with
its uid as precondition and the pass writes nothing; its children (pods, Services, the
``<job>-evidence`` ConfigMap, a Kueue Workload, a PodGroup) go by their owner references, so the
clean-up the ``finished`` step would still do is left to the garbage collector. The next pass
finds the job being deleted (``deleting``: nothing to do), or no job at all.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import DeleteJob, Emit
from airflow_t9k.controller.reconcile.passstate import uid_of
from airflow_t9k.controller.reconcile.status import FINISHED, StatusBuilder, timestamp
from airflow_t9k.kinds.base import InvalidSpec

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.passstate import PassState

REASON = "TTLExpired"  # the Event that says why the job went


def expire(p: PassState) -> PassState:
    """A finished job whose TTL has passed is deleted (ends the pass); before, the pass is woken at the TTL."""
    sb = p.sb
    if sb.old_phase not in FINISHED:
        return p  # a job still running is never touched
    ttl = ttl_of(p)
    ended = ended_at(sb)
    if ttl is None or ended is None:
        return p
    left = (ended - p.now).total_seconds() + ttl
    if left > 0:
        p.expire_in = left
        return p
    p.actions = [DeleteJob(uid_of(p.job))]
    p.events = [Emit("Normal", REASON, f"The job {str(sb.old_phase).lower()} at {timestamp(ended)} and "
                                       f"ttlSecondsAfterFinished ({ttl} s) has passed: the job is deleted.")]  # fmt: skip
    return p.end(keep_status=True)


def ttl_of(p: PassState) -> int | None:
    """The job's ``ttlSecondsAfterFinished``; None when it has none, or one that is not a
    non-negative integer (the CRD refuses that; one applied by hand fails a running job's
    validation, and a finished job then just stays)."""
    try:
        return p.kind.ttl_after_finished(p.job)
    except InvalidSpec:
        return None


def ended_at(sb: StatusBuilder) -> datetime | None:
    """When the job ended: its ``Completed`` or ``Failed`` condition's transition to true."""
    for type_ in ("Completed", "Failed"):
        c = sb.condition(type_)
        if c and c.get("status") == "True" and c.get("lastTransitionTime"):
            try:
                at = datetime.fromisoformat(str(c["lastTransitionTime"]).replace("Z", "+00:00"))
            except ValueError:
                return None
            return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)
    return None
