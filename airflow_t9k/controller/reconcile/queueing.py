"""Admission through Kueue: the job's Workload, and whether its pods may exist.

A job that names a queue (T9k ``spec.scheduler.t9kScheduler.queue``, AscendJob
``runPolicy.schedulingPolicy.queue``), on a cluster whose Kueue the controller uses
(``Observed.queueing == "kueue"``), owns one Workload (kueue.x-k8s.io/v1beta2): one podSet
per replica type. Its pods exist only while that Workload is admitted: Kueue decides
all-or-nothing (or down to ``minCount``) before any pod is created, so two jobs can no longer
each get half their pods and deadlock.

Kueue's protocol for an owner (what its own job integrations do): create the Workload; start
the pods when it is Admitted, on the nodes of the flavors it assigned; on ``Evicted``
(preemption, deactivation, pods-ready timeout) stop the pods, then clear
``status.admission`` so the quota is released and the Workload queues again; at the end
mark it ``Finished`` so the quota frees at once. Pure: everything comes in through the job
and ``Observed``; the writes go out as actions.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import Action, Create, Delete, Emit, ReplaceStatus
from airflow_t9k.controller.reconcile.desired import build_pod, child_meta, scheduler_settings, slots
from airflow_t9k.controller.reconcile.disruption import record
from airflow_t9k.controller.reconcile.observe import Observed, is_deleting
from airflow_t9k.controller.reconcile.podsetinfo import topology_request
from airflow_t9k.controller.reconcile.status import StatusBuilder, bounded, timestamp
from airflow_t9k.kinds.base import LABEL_RANK

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import JobKind, Obj

API_VERSION = "kueue.x-k8s.io/v1beta2"
CONDITION = "Admitted"  # on the job: False while it waits in its queue, True once Kueue admitted it
# Eviction reasons after which Kueue queues the Workload again by itself (its jobframework's rule).
REQUEUED_BY_KUEUE = ("Preempted", "NodeFailures")
# What Kueue reads of a podSet's pod spec besides the containers: placement, and requests.
# resourceClaims, as Kueue's own job integrations pass the whole pod spec: Kueue counts the DRA
# devices of claims from ResourceClaimTemplates against its quota where its DRA integration is on
# (docs/queueing.md "DRA devices": which version does what with them).
POD_TEMPLATE_KEYS = ("nodeSelector", "tolerations", "affinity", "runtimeClassName", "overhead", "resourceClaims")


@dataclass(frozen=True)
class Gate:
    """What Kueue's state means for this pass."""

    admitted: bool
    actions: tuple[Action, ...] = ()
    events: tuple[Emit, ...] = ()
    # replica type -> the podSetAssignment Kueue made for it (flavors, count)
    assignments: dict[str, Obj] = field(default_factory=dict)
    requeue_after: float | None = None
    workload: Obj | None = None  # the admitted Workload: what its admission puts on the pods (reconcile/podsetinfo.py)


def queue_name(job: Obj) -> str | None:
    if job.get("kind") == "AscendJob":
        policy = (((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy")) or {}
        queue = policy.get("queue")
    else:
        queue = (scheduler_settings(job) or {}).get("queue")
    return str(queue) if queue else None


def in_use(job: Obj, observed: Observed) -> bool:
    """Does Kueue admit this job? Once decided, the answer sticks (its status says which way)."""
    queue = queue_name(job)
    if queue is None or observed.queueing not in ("kueue", "auto"):
        return False
    if observed.queueing == "kueue":
        return True
    conditions = (job.get("status") or {}).get("conditions") or []
    if any(c.get("type") == CONDITION for c in conditions):
        return True
    # "auto": a job already started without Kueue keeps running without it.
    return not conditions and queue in observed.local_queues


def why_not(job: Obj, observed: Observed) -> str:
    """One sentence: why this job's queue is not enforced through Kueue."""
    if observed.queueing == "off":
        return "the controller runs with --queueing=off"
    if observed.queueing == "absent":
        return "this cluster does not serve Kueue's Workload API (kueue.x-k8s.io/v1beta2)"
    queue = queue_name(job)
    if queue is None:
        return "the spec names no queue"
    if queue not in observed.local_queues:
        return f"namespace {job['metadata'].get('namespace')} has no LocalQueue {queue!r}"
    return "the job started before its LocalQueue existed"


def workload_name(job: Obj) -> str:
    # The kind is part of the name: a GenericJob and a PyTorchTrainingJob may share a name.
    return f"{job['kind'].lower()}-{job['metadata']['name']}"


def podset_name(rtype: str) -> str:
    return rtype.lower()


# -- the Workload ---------------------------------------------------------------------------


def priority(job: Obj, observed: Observed) -> tuple[Obj, str | None]:
    """The Workload spec's priority fields, or (``{}``, why it cannot be resolved yet)."""
    if job.get("kind") == "AscendJob":
        policy = (((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy")) or {}
        name = policy.get("priorityClass")
        if not name:
            return {}, None
        cls = observed.priority_classes.get(str(name))
        if cls is None:
            return {}, (f"runPolicy.schedulingPolicy.priorityClass {name!r} names neither a WorkloadPriorityClass "
                        "nor a PriorityClass; create one, or remove the field")  # fmt: skip
        group = "kueue.x-k8s.io" if cls.get("kind") == "WorkloadPriorityClass" else "scheduling.k8s.io"
        ref = {"group": group, "kind": cls.get("kind", "PriorityClass"), "name": str(name)}
        return {"priorityClassRef": ref, "priority": int(cls.get("value") or 0)}, None
    value = (scheduler_settings(job) or {}).get("priority")
    if isinstance(value, int) and not isinstance(value, bool):
        return {"priority": value}, None
    return {}, None


def _container(c: Obj) -> Obj:
    return {k: copy.deepcopy(c[k]) for k in ("name", "image", "resources") if k in c}


def podsets(kind: JobKind, job: Obj) -> list[Obj]:
    """One podSet per replica type, its template holding what each pod will request."""
    out: list[Obj] = []
    specs = kind.replica_specs(job)
    first = {s.type: s for s in reversed(slots(kind, job))}
    for spec in specs:
        if spec.replicas < 1 or spec.type not in first or not kind.queued(job, spec.type):
            continue
        pod_spec = build_pod(kind, job, first[spec.type], 0, False)["spec"]
        template: Obj = {"containers": [_container(c) for c in pod_spec.get("containers") or []]}
        if pod_spec.get("initContainers"):
            template["initContainers"] = [_container(c) for c in pod_spec["initContainers"]]
        template.update({k: copy.deepcopy(pod_spec[k]) for k in POD_TEMPLATE_KEYS if k in pod_spec})
        entry: Obj = {"name": podset_name(spec.type), "count": spec.replicas, "template": {"spec": template}}
        request = topology_request(spec.template or {}, LABEL_RANK)
        if request is not None:  # topology-aware scheduling, asked for as Kueue's integrations read it
            entry["topologyRequest"] = request
        out.append(entry)
    for podset, low in _min_counts(kind, job, out).items():
        for p in out:
            if p["name"] == podset and low < p["count"]:
                p["minCount"] = low
    return out


def _min_counts(kind: JobKind, job: Obj, sets: list[Obj]) -> dict[str, int]:
    """Partial admission: an elastic job may start with ``minReplicas``, an AscendJob with ``minAvailable``."""
    elastic = getattr(kind, "elastic", None)
    if callable(elastic) and elastic(job) is not None and len(sets) == 1:
        return {sets[0]["name"]: max(1, int(elastic(job).get("minReplicas", 1)))}
    if job.get("kind") == "AscendJob" and sets:
        policy = (((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy")) or {}
        wanted = policy.get("minAvailable")
        total = sum(p["count"] for p in sets)
        if isinstance(wanted, int) and 0 < wanted < total:
            last = sets[-1]  # the workers; the leader is always one of the pods that must run
            return {last["name"]: max(1, last["count"] - (total - wanted))}
    return {}


def workload(kind: JobKind, job: Obj, spec_priority: Obj) -> Obj:
    meta = child_meta(job, workload_name(job))
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": meta,
        "spec": {"queueName": queue_name(job), "podSets": podsets(kind, job), **spec_priority},
    }


# -- reading the Workload -------------------------------------------------------------------


def wl_condition(wl: Obj, type_: str) -> Obj | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None)


def wl_true(wl: Obj, type_: str) -> bool:
    c = wl_condition(wl, type_)
    return bool(c and c.get("status") == "True")


def admitted_counts(job: Obj, observed: Observed) -> dict[str, int]:
    """podSet name -> the count Kueue admitted, for an admitted, not evicted Workload."""
    wl = observed.workloads.get(workload_name(job))
    if wl is None or not wl_true(wl, "Admitted") or wl_true(wl, "Evicted") or wl_true(wl, "Finished"):
        return {}
    admission = (wl.get("status") or {}).get("admission") or {}
    return {str(a.get("name")): int(a.get("count") or 0) for a in admission.get("podSetAssignments") or [] if "count" in a}


def admitted_shape(kind: JobKind, job: Obj, observed: Observed) -> Obj:
    """The job at the size Kueue admitted it (smaller than asked only under partial admission)."""
    if not in_use(job, observed):
        return job
    counts = admitted_counts(job, observed)
    shaped = job
    for spec in kind.replica_specs(job):
        got = counts.get(podset_name(spec.type))
        if got is not None and 0 < got < spec.replicas:
            shaped = _resize(kind, shaped, spec.type, got)
    return shaped


def _resize(kind: JobKind, job: Obj, rtype: str, count: int) -> Obj:
    out = copy.deepcopy(job)
    spec = out.setdefault("spec", {})
    elastic = getattr(kind, "elastic", None)
    if callable(elastic) and elastic(job) is not None:
        spec["elastic"]["expectedReplicas"] = count
        return out
    replica_specs = spec.get("replicaSpecs")
    if isinstance(replica_specs, dict) and isinstance(replica_specs.get(rtype), dict):  # AscendJob
        replica_specs[rtype]["replicas"] = count
    elif isinstance(replica_specs, list):
        for r in replica_specs:
            if isinstance(r, dict) and r.get("type") == rtype:
                r["replicas"] = count
    return out


# -- the gate ---------------------------------------------------------------------------------


def gate(kind: JobKind, job: Obj, observed: Observed, sb: StatusBuilder) -> Gate:
    """May this job's pods exist? Sets the job's ``Admitted`` condition and says what to write."""
    queue = queue_name(job)
    name = workload_name(job)
    wl = observed.workloads.get(name)
    live_pods: list[Action] = [Delete("Pod", n, _uid(p)) for n, p in observed.pods.items() if not is_deleting(p)]
    if wl is None or is_deleting(wl):
        fields, problem = priority(job, observed)
        if problem is not None:
            return _wait(sb, live_pods, "PriorityClassNotFound", problem, requeue=10.0)
        if wl is not None:  # being deleted (e.g. after a pause): create the new one when it is gone
            return _wait(sb, live_pods, "Queueing", f"Waiting for the old Workload {name} to be deleted.")
        return _wait(sb, [*live_pods, Create(workload(kind, job, fields))], "Queueing",
                     f"Creating Workload {name} in LocalQueue {queue}.")  # fmt: skip
    admission = (wl.get("status") or {}).get("admission")
    if wl_true(wl, "Finished"):
        # Finished while the job still runs (someone else wrote it): queue again with a new one.
        return _wait(sb, [*live_pods, Delete("Workload", name, _uid(wl))], "Queueing",
                     f"Workload {name} was finished although the job was not; queueing again.")  # fmt: skip
    if admission and wl_true(wl, "Evicted"):
        return _evicted(job, wl, observed, sb, live_pods)
    if admission and wl_true(wl, "Admitted"):
        cq = admission.get("clusterQueue", "?")
        message = f"Admitted by ClusterQueue {cq} through LocalQueue {queue}."
        events = (Emit("Normal", "Admitted", f"Workload {name} admitted by ClusterQueue {cq} (LocalQueue {queue})."),) \
            if sb.set_condition(CONDITION, True, "Admitted", message) else ()  # fmt: skip
        by_type = {str(a.get("name")): a for a in admission.get("podSetAssignments") or []}
        assignments = {spec.type: by_type[podset_name(spec.type)] for spec in kind.replica_specs(job)
                       if podset_name(spec.type) in by_type}  # fmt: skip
        return Gate(True, events=events, assignments=assignments, workload=wl)
    pending = wl_condition(wl, "QuotaReserved") if not admission else wl_condition(wl, "Admitted")
    if pending and pending.get("message"):
        return _wait(sb, live_pods, str(pending.get("reason") or "Pending"), str(pending["message"]))
    return _wait(sb, live_pods, "Queueing", f"Workload {name} is waiting for Kueue in LocalQueue {queue}.")


def _wait(sb: StatusBuilder, actions: list[Action], reason: str, message: str, requeue: float | None = None) -> Gate:
    sb.set_condition(CONDITION, False, reason, message)
    sb.set_phase("Pending")
    sb.set_condition("Running", False, "Queued", "The job waits for admission by Kueue.")
    return Gate(False, tuple(actions), requeue_after=requeue)


def _evicted(job: Obj, wl: Obj, observed: Observed, sb: StatusBuilder, live_pods: list[Action]) -> Gate:
    """Stop the pods (no restart is spent: an eviction is not a failure), then give the quota back."""
    evicted = wl_condition(wl, "Evicted") or {}
    reason, message = str(evicted.get("reason") or "Evicted"), str(evicted.get("message") or "evicted by Kueue")
    flipped = sb.set_condition(CONDITION, False, "Evicted", f"Evicted by Kueue ({reason}): {message}")
    if observed.pods:  # one entry per eviction that took pods away (the Workload's and the condition's times key it)
        key = f"kueue/{_uid(wl)}/{evicted.get('lastTransitionTime', '')}"
        record(sb, "all replicas", key, bounded(f"Evicted by Kueue ({reason}): {message}", 300), counted=False)
    sb.set_phase("Pending")
    sb.set_condition(
        "Running", False, "Queued", "The job was evicted by Kueue; its pods are deleted and it waits to be admitted again."
    )
    events = (Emit("Normal", "Evicted", bounded(f"Evicted by Kueue ({reason}): {message}; the pods are deleted and "
                                                "the job waits in its queue again.", 1000)),) if flipped else ()  # fmt: skip
    actions: list[Action] = list(live_pods)
    if not observed.pods:  # every pod is gone: now the reservation may be released
        actions.append(ReplaceStatus("Workload", workload_name(job), release(wl, reason, message, sb.now)))
    return Gate(False, tuple(actions), events)


def release(wl: Obj, reason: str, message: str, now: datetime) -> Obj:
    """The Workload with its reservation cleared, as Kueue's own integrations acknowledge an eviction."""
    status = copy.deepcopy(wl.get("status") or {})
    status.pop("admission", None)
    conditions = status.setdefault("conditions", [])
    _set(conditions, "Requeued", reason in REQUEUED_BY_KUEUE, reason, message, now)
    _set(conditions, "QuotaReserved", False, "Pending", message, now)
    _set(conditions, "Admitted", False, "NoReservation", "The workload has no reservation", now)
    return {**wl, "status": status}


def finished(job: Obj, observed: Observed, phase: str, message: str, now: datetime) -> list[Action]:
    """Mark the Workload Finished once the job has ended, so its quota frees at once."""
    wl = observed.workloads.get(workload_name(job))
    if wl is None or is_deleting(wl) or wl_true(wl, "Finished"):
        return []
    status = copy.deepcopy(wl.get("status") or {})
    _set(status.setdefault("conditions", []), "Finished", True, "Succeeded" if phase == "Succeeded" else "Failed",
         bounded(message or f"{job['kind']} {job['metadata']['name']} {phase.lower()}", 1000), now)  # fmt: skip
    return [ReplaceStatus("Workload", workload_name(job), {**wl, "status": status})]


def released(job: Obj, observed: Observed) -> list[Action]:
    """A paused job gives its quota back: its Workload goes; resuming queues a new one."""
    wl = observed.workloads.get(workload_name(job))
    return [] if wl is None or is_deleting(wl) else [Delete("Workload", workload_name(job), _uid(wl))]


def _set(conditions: list[Obj], type_: str, status: bool, reason: str, message: str, now: datetime) -> None:
    value = "True" if status else "False"
    for c in conditions:
        if c.get("type") == type_:
            if c.get("status") != value:
                c["lastTransitionTime"] = timestamp(now)
            c.update(status=value, reason=reason, message=message)
            return
    conditions.append({"type": type_, "status": value, "reason": reason, "message": message,
                       "lastTransitionTime": timestamp(now)})  # fmt: skip


def _uid(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("uid")
