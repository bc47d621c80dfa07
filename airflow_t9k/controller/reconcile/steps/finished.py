"""A finished job is only cleaned up: its phase never changes again."""

from __future__ import annotations

from airflow_t9k.controller.reconcile import queueing, volcano
from airflow_t9k.controller.reconcile.cleanup import cleanup, remove_all
from airflow_t9k.controller.reconcile.evidence import keep_first
from airflow_t9k.controller.reconcile.passstate import PassState, failed_invalid, phase_message
from airflow_t9k.controller.reconcile.status import FINISHED
from airflow_t9k.controller.reconcile.steps.record import write_tasks


def finished(p: PassState) -> PassState:
    """Its clean-up policy (after its evidence is kept), its PodGroup and its Workload's quota go."""
    sb = p.sb
    if sb.old_phase not in FINISHED:
        return p
    if failed_invalid(sb):
        p.actions = remove_all(p.observed)
    else:
        p.actions = keep_first(p.job, p.observed, sb, cleanup(p.kind, p.job, p.observed))
    p.actions += volcano.finished(p.observed)
    p.actions += queueing.finished(p.job, p.observed, str(sb.old_phase), phase_message(sb), p.now)
    write_tasks(p, finished=True)
    return p.end()
