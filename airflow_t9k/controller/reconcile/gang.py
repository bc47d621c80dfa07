"""Gang scheduling with no add-on: the job's PodGroup in Kubernetes' own Workload API (issue 30, item 4).

Kubernetes 1.35 brought a Workload API for gang scheduling (KEP-4671, alpha); in 1.36 a pod names
its group in ``spec.schedulingGroup.podGroupName`` and the group is a ``scheduling.k8s.io/v1alpha2``
PodGroup whose ``schedulingPolicy.gang.minCount`` kube-scheduler's GangScheduling plugin enforces:
pods of the group wait in its Permit stage until ``minCount`` of them have a node, and none is bound
before that (the feature gates ``GenericWorkload`` on the API server and ``GangScheduling`` on
the scheduler).

Where the API server serves it (``Observed.gang_problem`` is None) and neither Kueue nor Volcano
admits the job, a job of two or more pods owns one PodGroup ``<kind>-<name>`` (minCount: every
pod; an elastic job's ``minReplicas``; an AscendJob's ``minAvailable``), and the pods of a
*placement* join it: pods created while none of the job's pods is bound to a node (the first
start, and after a group restart, a pause, an eviction by Kueue or anyone deleting them all). A
replacement while others run is placed alone: the scheduler's gang counts only pods it has not
seen end, so a lone replacement next to a finished replica could never reach ``minCount``.

``status.scheduling`` says what the job's scheduler settings do on this cluster: who enforces the
gang, whether ``t9kScheduler``'s queue is enforced by Kueue or only recorded, and whether its
priority is Kueue's, a PriorityClass kube-scheduler preempts by (reconcile/priority.py), or recorded.
Pure: everything comes in through the job and ``Observed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile import priority, queueing, volcano
from airflow_t9k.controller.reconcile.actions import Action, Create
from airflow_t9k.controller.reconcile.desired import child_meta, scheduler_settings
from airflow_t9k.controller.reconcile.observe import Observed, is_deleting

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import JobKind, Obj

API_VERSION = "scheduling.k8s.io/v1alpha2"
STATUS = "scheduling"


def name(job: Obj) -> str:
    return f"{job['kind'].lower()}-{job['metadata']['name']}"


def min_count(kind: JobKind, job: Obj, pods: int) -> int:
    """How many pods must fit together: every pod, unless the job can start with fewer."""
    elastic = getattr(kind, "elastic", None)
    if callable(elastic) and elastic(job) is not None:
        return max(1, min(pods, int(elastic(job).get("minReplicas") or 1)))
    if job.get("kind") == "AscendJob":
        wanted = ((((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy")) or {}).get("minAvailable")
        if isinstance(wanted, int) and not isinstance(wanted, bool) and 0 < wanted < pods:
            return wanted
    return pods


def wanted(kind: JobKind, job: Obj, observed: Observed, queued: bool, pods: int) -> bool:
    """A PodGroup for this job: served here, not admitted by Kueue or Volcano, two pods or more."""
    return (observed.gang_problem is None and not queued and pods >= 2
            and not volcano.wanted(kind, job, observed, queued))  # fmt: skip


def podgroup(job: Obj, count: int) -> Obj:
    return {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": child_meta(job, name(job)),
            "spec": {"schedulingPolicy": {"gang": {"minCount": count}}}}  # fmt: skip


def placing(observed: Observed) -> bool:
    """No pod of the job is bound to a node: the pods created now are placed together."""
    return not any((p.get("spec") or {}).get("nodeName") for p in observed.pods.values() if not is_deleting(p))


def gate(
    kind: JobKind, job: Obj, observed: Observed, queued: bool, pods: int, rendered: dict[str, Obj]
) -> tuple[list[Action], bool]:
    """(actions, hold the pods back): the PodGroup, and the rendered pods of a placement joining it."""
    if not wanted(kind, job, observed, queued, pods):
        return [], False
    group = observed.gangs.get(name(job))
    if group is not None and is_deleting(group):
        return [], bool(rendered)  # a new one once it is gone: a pod must not name a group being deleted
    actions: list[Action] = [Create(podgroup(job, min_count(kind, job, pods)))] if group is None else []
    if placing(observed):
        for pod in rendered.values():
            pod["spec"]["schedulingGroup"] = {"podGroupName": name(job)}
    return actions, False


def placement(group: Obj | None) -> str | None:
    """What kube-scheduler last said of the gang (its ``PodGroupScheduled`` condition)."""
    for c in ((group or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodGroupScheduled":
            said = f"{c.get('reason') or c.get('status')}"
            return f"{said}: {c['message']}" if c.get("message") else said
    return None


def describe(kind: JobKind, job: Obj, observed: Observed, queued: bool, pods: int) -> Obj:
    """``status.scheduling``: ``effect`` (``EnforcedByKueue``, ``EnforcedByVolcano``, ``GangOnly``: the
    gang by kube-scheduler and nothing else, ``Ignored``), and what happens to the gang, the queue
    and the priority here, in words."""
    sched = scheduler_settings(job) or {}
    out: Obj = {}
    if queued:
        out["effect"] = "EnforcedByKueue"
        out["gang"] = ("enforced by Kueue: no pod exists before the whole job (or its minimum) is admitted by "
                       f"LocalQueue {queueing.queue_name(job)}")  # fmt: skip
    elif volcano.wanted(kind, job, observed, queued):
        out["effect"] = "EnforcedByVolcano"
        out["gang"] = f"enforced by Volcano: PodGroup {volcano.name(job)} (scheduling.volcano.sh/v1beta1)"
    elif pods < 2:
        out["effect"] = "Ignored" if sched else "NotNeeded"
        out["gang"] = "not needed: the job has one pod"
    elif observed.gang_problem is None:
        count = min_count(kind, job, pods)
        out["effect"] = "GangOnly"
        out["gang"] = (f"enforced by kube-scheduler: PodGroup {name(job)} ({API_VERSION}) with minCount {count}: no pod "
                       f"is bound to a node until {count} of the {pods} fit at once")  # fmt: skip
        placed = placement(observed.gangs.get(name(job)))
        if placed:
            out["placement"] = placed
    else:
        out["effect"] = "Ignored"
        out["gang"] = f"not enforced: pods are placed one by one ({observed.gang_problem})"
    choice = priority.choose(job, observed)
    if sched and choice is not None:
        why = "" if queued else queueing.why_not(job, observed)
        if queued:
            out["queue"] = f"{sched['queue']}: enforced by Kueue (the job waits in LocalQueue {sched['queue']})"
        else:
            out["queue"] = f"{sched['queue']}: ignored, only the pod label scheduler.tensorstack.dev/queue ({why})"
        out["priority"] = priority.describe(choice, queued, why, priority.own_classes(kind, job))
        if choice.name is not None:
            out["priorityClassName"] = choice.name  # what the pods created from now on carry
    return out
