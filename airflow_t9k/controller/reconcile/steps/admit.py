"""The first steps: a job being deleted, its job template, its spec, its replicas as observed."""

from __future__ import annotations

from airflow_t9k.controller.reconcile import queueing, template
from airflow_t9k.controller.reconcile.desired import check_names, slots
from airflow_t9k.controller.reconcile.passstate import PassState, invalid
from airflow_t9k.controller.reconcile.progress import rename_legacy
from airflow_t9k.controller.reconcile.slotstate import recorded_restarts, slot_state
from airflow_t9k.kinds.base import InvalidSpec
from airflow_t9k.kinds.templates import unresolved


def deleting(p: PassState) -> PassState:
    """A job being deleted: garbage collection takes its children; the pass writes nothing."""
    return p.end(keep_status=True) if p.job["metadata"].get("deletionTimestamp") else p


def legacy(p: PassState) -> PassState:
    """Conditions an earlier version of this controller wrote, in the seeds' names (``Initialized`` -> ``Initializing``)."""
    rename_legacy(p.sb)
    return p


def resolve_template(p: PassState) -> PassState:
    """A job naming a template gets it merged in first, before anything exists (reconcile/template.py)."""
    if not unresolved(p.job):
        template.note(p.sb, p.job)
        return p
    got = template.resolve(p.sb, p.job, p.observed, p.now)
    p.actions, p.events, p.requeue_after = list(got.actions), list(got.events), got.requeue_after
    return p.end(keep_status=got.status is p.sb.old)


def shape(p: PassState) -> PassState:
    """An invalid spec fails the job, naming the problem; else its replicas' slots, at the size Kueue admitted."""
    try:
        p.kind.validate(p.job)
        p.kind.check_allowed(p.job, p.observed)  # what the controller's flags allow (BeamJob's external Service)
        check_names(p.kind, p.job)
        p.job = queueing.admitted_shape(p.kind, p.job, p.observed)
        p.slots = slots(p.kind, p.job)
    except InvalidSpec as exc:
        return invalid(p, str(exc))
    return p


def observe_replicas(p: PassState) -> PassState:
    """Each slot's pod and restart count (the higher of the pod's annotation and the last status)."""
    recorded = recorded_restarts(p.sb)
    p.states = [slot_state(s, p.observed, recorded) for s in p.slots]
    return p
