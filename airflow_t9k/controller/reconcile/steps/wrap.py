"""The steps that run on every pass, also one a step ended: the plan sealed, then what its pods
used, what its reporting replica printed, and the status in the kind's own shape."""

from __future__ import annotations

from dataclasses import replace

from airflow_t9k.controller.reconcile import queueing
from airflow_t9k.controller.reconcile.actions import Emit, Plan
from airflow_t9k.controller.reconcile.overrun import with_overrun
from airflow_t9k.controller.reconcile.passstate import PassState, finish_plan
from airflow_t9k.controller.reconcile.reporting import with_progress
from airflow_t9k.controller.reconcile.usage import with_usage


def seal(p: PassState) -> PassState:
    """The plan: ``sb.new`` with a phase change announced first, or the status the pass found;
    woken at a finished job's TTL (steps/expire.py) if that comes first."""
    requeue = p.requeue_after
    if p.expire_in is not None:
        requeue = p.expire_in if requeue is None else min(requeue, p.expire_in)
    if p.keep_status:
        p.result = Plan(tuple(p.actions), p.sb.old, tuple(p.events), requeue)
    else:
        p.result = finish_plan(p.sb, p.actions, p.events, requeue)
    return p


def usage(p: PassState) -> PassState:
    """Accelerator-seconds of the pods' runs, closed in the pass that deletes them (docs/usage.md)."""
    p.result = with_usage(p.submitted, p.core, _sealed(p), p.observed, p.now)
    return p


def progress(p: PassState) -> PassState:
    """What the reporting replica printed, at most once per interval (docs/progress.md)."""
    p.result = with_progress(p.submitted, p.core, _sealed(p), p.observed, p.now)
    return p


def overrun(p: PassState) -> PassState:
    """A deadline miss seen coming: the ETA just written against the task's deadline on the job."""
    p.result = with_overrun(p.submitted, _sealed(p))
    return p


def public(p: PassState) -> PassState:
    """The status in the kind's own shape (the identity for T9k kinds; AscendJob's Kubeflow shape)."""
    p.result = public_plan(p, _sealed(p))
    return p


def public_plan(p: PassState, inner: Plan) -> Plan:
    restarting = any(e.reason in ("ReplicaRestarting", "StallRestarting") for e in inner.events)
    status, extra = p.kind.public_status(p.submitted, inner.status, restarting, p.now, p.observed)
    if queueing.in_use(p.submitted, p.observed):  # Kueue admits the whole gang: the kind's "not enforced" warning is wrong
        extra = [e for e in extra if e[1] != "GangSchedulingNotEnforced"]
    if not extra and status is inner.status:
        return inner
    return replace(inner, status=status, events=inner.events + tuple(Emit(*e) for e in extra))


def _sealed(p: PassState) -> Plan:
    if p.result is None:
        raise RuntimeError("a step after 'seal' ran before it")
    return p.result
