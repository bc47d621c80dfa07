"""What the pass does to the replicas: end the job, restart a fixed-world group, or tend each replica."""

from __future__ import annotations

from airflow_t9k.controller.reconcile import queueing, volcano
from airflow_t9k.controller.reconcile.actions import Action, Create, Delete, Emit
from airflow_t9k.controller.reconcile.cleanup import cleanup
from airflow_t9k.controller.reconcile.disruption import disruption, node_of, record, replace_disrupted, restart_group
from airflow_t9k.controller.reconcile.evidence import keep_first
from airflow_t9k.controller.reconcile.inplace import authorize, authorized
from airflow_t9k.controller.reconcile.observe import is_deleting
from airflow_t9k.controller.reconcile.passstate import PassState, uid_of
from airflow_t9k.controller.reconcile.progress import finish, progress, root_cause
from airflow_t9k.controller.reconcile.status import failure_detail
from airflow_t9k.kinds.base import ANNOTATION_RESTARTS, UNLIMITED


def end_job(p: PassState) -> PassState:
    """A job that ends in this pass: its phase and conditions, the replica that failed first, then
    its clean-up policy (after its evidence is kept), its PodGroup and its Workload's quota."""
    if p.outcome is None:
        return p
    phase, reason, message = p.outcome
    finish(p.sb, phase, reason, message)
    if phase == "Failed":
        root_cause(p.sb, p.states)
    p.actions += keep_first(p.job, p.observed, p.sb, cleanup(p.kind, p.job, p.observed)) + volcano.finished(p.observed)
    p.actions += queueing.finished(p.job, p.observed, phase, message, p.now) if p.queued else []
    return p


def group_restart(p: PassState) -> PassState:
    """A disrupted replica of a fixed-world launch: every pod goes, and they come back together."""
    if p.outcome is not None or p.group_cause is None:
        return p
    p.actions += restart_group(p.sb, p.observed, p.group_cause, p.events, in_place=p.in_place)
    progress(p.sb, p.states, children_missing=True)
    return p


def replicas(p: PassState) -> PassState:
    """Each replica of a job that goes on: a missing pod is created; a disrupted one replaced without
    spending a restart; one built for an older shape recreated; an ended one restarted when its
    policy and the budget allow (deleted now, recreated under the same name by a later pass)."""
    if p.outcome is not None or p.group_cause is not None:
        return p
    sb, job, kind = p.sb, p.job, p.kind
    actions: list[Action] = []
    wanted = {s.slot.pod_name for s in p.states}
    for s in p.states:
        if s.pod is not None and (disruption(s.pod) is not None or s.node_caused is not None):
            actions += replace_disrupted(sb, s, p.events)
            continue
        if s.pod is None:
            pod = p.rendered.get(s.slot.pod_name)
            if pod is None:  # waiting for what pod_inputs needs
                continue
            pod["metadata"]["annotations"][ANNOTATION_RESTARTS] = str(s.restarts)
            actions.append(Create(pod))
            s.creating = True
            continue
        if s.phase in ("Pending", "Running") and kind.outdated(job, s.slot.spec, s.slot.rank, s.pod):
            # Not a failure: the pod was built for an older shape of the job (e.g. a hostfile
            # before a rescale). It comes back under the same name; no restart is spent.
            actions.append(Delete("Pod", s.slot.pod_name, uid_of(s.pod)))
            p.events.append(
                Emit("Normal", "ReplicaRecreated", f"Replica {s.slot.pod_name} is recreated for the job's new shape.")
            )
            continue
        if s.restart_recorded:
            actions.append(authorize(s.pod, s.restarts) if s.in_place else Delete("Pod", s.slot.pod_name, uid_of(s.pod)))
            continue
        if p.debug or not s.ended:
            continue
        policy = s.slot.spec.restart
        if s.can_restart(p.budget):
            s.restarts += 1
            if p.budget is not None:
                p.budget[0] -= 1
            what = "failed with " + failure_detail(s.pod) if s.phase == "Failed" else "completed"
            if s.in_place:  # the kubelet restarts it on its node; the gate lets it run once this is on record
                actions.append(authorize(s.pod, s.restarts))
                key = f"{uid_of(s.pod)}/in-place/{authorized(s.pod or {}) + 1}"
            else:
                actions.append(Delete("Pod", s.slot.pod_name, uid_of(s.pod)))
                key = uid_of(s.pod) or ""
            node = node_of(s.pod) if s.phase == "Failed" else None  # reconcile/nodes.py counts failures per node
            record(sb, s.slot.pod_name, key, what, counted=True, exit_code=s.exit_code, in_place=s.in_place, node=node)
            count = f"{s.restarts}, no limit" if policy.limit >= UNLIMITED else f"{s.restarts}/{policy.limit}"
            how = "restarting in place" if s.in_place else "restarting"
            p.events.append(
                Emit("Warning" if s.phase == "Failed" else "Normal", "ReplicaRestarting",
                     f"Replica {s.slot.pod_name} {what}; {how} ({count}, policy {policy.policy}).")
            )  # fmt: skip
    # Pods of replicas that no longer exist in the spec (e.g. replicas lowered).
    actions += [Delete("Pod", n, uid_of(pod)) for n, pod in p.observed.pods.items() if n not in wanted and not is_deleting(pod)]
    p.actions += actions
    progress(sb, p.states, children_missing=any(not isinstance(a, Delete) for a in p.children))
    return p
