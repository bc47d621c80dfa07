"""What the status records of every pass that gets past the gates: failed replicas, each
replica's entry, the restart budget spent, and when to plan again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.progress import replica_failure
from airflow_t9k.controller.reconcile.status import aggregate, replica_entry, replica_phase
from airflow_t9k.controller.reconcile.steps.expire import ttl_of

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.passstate import PassState
    from airflow_t9k.kinds.base import Obj


def failures(p: PassState) -> PassState:
    """Condition ``ReplicaFailure``: which replicas failed, first failure first."""
    replica_failure(p.sb, p.states)
    return p


def tasks(p: PassState) -> PassState:
    """``status.tasks`` (each replica's phase, restarts and containers), ``aggregate``, ``backoffCount``."""
    write_tasks(p, finished=p.outcome is not None)
    if p.kind.backoff_limit(p.job) is not None:
        p.sb.new["backoffCount"] = sum(s.restarts for s in p.states)
    return p


def wake(p: PassState) -> PassState:
    """A job that goes on and has a deadline is planned again when the deadline passes (the first
    of ``activeDeadlineSeconds`` and a stall's: steps/stall.py); one that ends in this pass and has
    a ``ttlSecondsAfterFinished``, when that passes (steps/expire.py)."""
    timers = [t for t in (p.deadline_in, p.stall_in) if t is not None]
    if p.outcome is None and timers:
        p.requeue_after = min(timers)
    if p.outcome is not None:
        ttl = ttl_of(p)
        p.expire_in = None if ttl is None else float(ttl)
    return p


def write_tasks(p: PassState, finished: bool) -> None:
    sb, kind, job = p.sb, p.kind, p.job
    out: list[Obj] = []
    entries: list[Obj] = []
    decisive = kind.decisive_replica(job)  # its termination message is the job's result
    previous = {e.get("name"): e.get("containers") for t in sb.old.get("tasks") or [] for e in t.get("status") or []}
    for s in p.states:
        phase = replica_phase(s.pod, s.creating, deleted=finished)
        entry = replica_entry(s.slot.pod_name, s.pod, phase, s.restarts, message=(s.slot.type, s.slot.rank) == decisive)
        if finished and s.phase is None and previous.get(s.slot.pod_name):
            entry["containers"] = previous[s.slot.pod_name]  # cleaned up: how it ended stays on record
        entries.append(entry)
        if not out or out[-1]["type"] != s.slot.type:
            out.append({"type": s.slot.type, "restartCount": 0, "status": []})
        out[-1]["status"].append(entry)
        out[-1]["restartCount"] += s.restarts
    sb.new["tasks"] = out
    sb.new["aggregate"] = aggregate(entries)
    sb.new.update(kind.status_extra(job, sb.new["aggregate"]["running"]))
    generation = job["metadata"].get("generation")
    if generation is not None:
        sb.new["observedGeneration"] = generation
