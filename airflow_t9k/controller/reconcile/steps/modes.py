"""What the job's scheduler settings do here, and Pause mode."""

from __future__ import annotations

from airflow_t9k.controller.reconcile import gang, priority, queueing
from airflow_t9k.controller.reconcile.actions import Delete, Emit
from airflow_t9k.controller.reconcile.desired import scheduler_settings
from airflow_t9k.controller.reconcile.observe import is_deleting
from airflow_t9k.controller.reconcile.passstate import PassState, uid_of
from airflow_t9k.controller.reconcile.steps.record import write_tasks
from airflow_t9k.kinds.base import pause_enabled


def scheduler(p: PassState) -> PassState:
    """Whether Kueue admits the job; without Kueue a ``t9kScheduler`` is only recorded, and the job says so.
    ``status.scheduling`` says what each setting does here: Kueue, Volcano or kube-scheduler's gang,
    or nothing (reconcile/gang.py)."""
    p.queued = queueing.in_use(p.job, p.observed)
    said = p.sb.new[gang.STATUS] = gang.describe(p.kind, p.job, p.observed, p.queued, len(p.states))
    sched = scheduler_settings(p.job)
    changed = p.sb.old.get(gang.STATUS) != said
    if sched and said["effect"] == "Ignored" and len(p.states) > 1 and changed:
        message = f"spec.scheduler.t9kScheduler asks for gang scheduling, but the gang is {said['gang']}."
        p.events.append(Emit("Warning", "GangSchedulingNotEnforced", message))
    unmapped = priority.warning(priority.choose(p.job, p.observed))
    if unmapped and changed:  # the platform maps priorities to classes, and this one has none
        p.events.append(Emit("Warning", "PriorityNotEnforced", unmapped))
    if p.queued or not sched:
        return p
    by_class = said.get("priorityClassName")
    enforced = (f"queue admission is not enforced (the priority is: PriorityClass {by_class} on the pods)" if by_class
                else "queue admission and priority are not enforced")  # fmt: skip
    message = (
        f"spec.scheduler.t9kScheduler (queue {sched['queue']!r}, priority {sched['priority']}) "
        f"is recorded on the pods, but this cluster has no T9k Scheduler: {enforced} "
        f"and pods use the default scheduler. No Kueue admission either: {queueing.why_not(p.job, p.observed)} "
        "(docs/queueing.md)."
    )
    if p.sb.set_condition("QueueAdmission", False, "NotEnforced", message):
        p.events.append(Emit("Warning", "QueueNotEnforced", message))
    return p


def pause(p: PassState) -> PassState:
    """Pause mode deletes every pod (phase ``Paused``) and gives Kueue's quota back."""
    if not pause_enabled(p.job):
        return p
    p.actions += [Delete("Pod", n, uid_of(pod)) for n, pod in p.observed.pods.items() if not is_deleting(pod)]
    p.actions += queueing.released(p.job, p.observed) if p.queued else []
    p.sb.set_phase("Paused")
    p.sb.set_condition("Paused", True, "Paused", "The job is paused: all replicas have been deleted or are being deleted.")
    p.sb.set_condition("Running", False, "Paused", "The job is paused.")
    write_tasks(p, finished=True)
    return p.end()
