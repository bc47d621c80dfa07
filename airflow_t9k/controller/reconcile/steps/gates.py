"""Gates that hold pods back: Kueue's admission, Volcano's PodGroup, Kubernetes' own PodGroup."""

from __future__ import annotations

from airflow_t9k.controller.reconcile import gang as native
from airflow_t9k.controller.reconcile import podsetinfo, queueing, volcano
from airflow_t9k.controller.reconcile.passstate import PassState, invalid
from airflow_t9k.controller.reconcile.steps.record import write_tasks
from airflow_t9k.kinds.base import InvalidSpec


def admission(p: PassState) -> PassState:
    """No pod before Kueue admits the job's Workload; an eviction deletes them without spending restarts.
    Admitted pods get what the admission says (reconcile/podsetinfo.py): the flavors' node labels and
    tolerations, the podset label, topology-aware scheduling's gate, the admission checks' podSetUpdates;
    a conflict fails the job (FailedToStart)."""
    if not p.queued:
        return p
    try:
        gate = queueing.gate(p.kind, p.asked, p.observed, p.sb)
    except InvalidSpec as exc:
        return invalid(p, str(exc))
    p.events += gate.events
    if not gate.admitted:
        p.actions += gate.actions
        p.requeue_after = gate.requeue_after
        write_tasks(p, finished=False)
        return p.end()
    for s in p.states:
        pod = p.rendered.get(s.slot.pod_name)
        if pod is None or s.slot.type not in gate.assignments or gate.workload is None:
            continue  # a pod of no podSet (ColossalAI's launcher) gets nothing of Kueue's
        try:
            info = podsetinfo.from_admission(gate.workload, queueing.podset_name(s.slot.type), p.observed.flavors)
            podsetinfo.apply(pod, info, source=f"replica {s.slot.pod_name}")
        except podsetinfo.Conflict as exc:
            # Kueue's own integrations fail such a job to start (FailedToStart): no retry can help.
            p.outcome = ("Failed", "FailedToStart", f"Kueue admitted the job, but it cannot start as admitted: {exc}.")
            p.rendered = {}
            break
    return p


def gang(p: PassState) -> PassState:
    """AscendJob's PodGroup: no pod until Volcano has taken it in, as MindCluster's operator waits."""
    actions, hold = volcano.gate(p.kind, p.job, p.observed, p.queued, p.rendered)
    p.actions += actions
    if hold:
        p.rendered = {}
    return p


def podgroup(p: PassState) -> PassState:
    """The job's PodGroup in Kubernetes' own Workload API, where it is served and neither Kueue nor
    Volcano admits the job: the pods of a placement join it, all or nothing (reconcile/gang.py)."""
    actions, hold = native.gate(p.kind, p.job, p.observed, p.queued, len(p.states), p.rendered)
    p.actions += actions
    if hold:
        p.rendered = {}
    return p
