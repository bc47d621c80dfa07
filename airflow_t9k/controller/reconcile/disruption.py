"""Disruptions are not failures: a replica taken away by the cluster is replaced for free.

A pod is *disrupted* when something other than its program ended it: the kubelet evicted it
under node pressure (phase ``Failed``, reason ``Evicted``), the Eviction API or the scheduler's
preemption took it, its node went away (PodGC, the taint manager), or a node shut down. Since
Kubernetes 1.26 all of these mark the pod with a ``DisruptionTarget`` condition first; the
reasons are kept for kubelets that only set ``status.reason``.

Such a replica is replaced without spending its restart budget, and every replacement, counted
or not, is written to ``status.restartHistory`` (bounded) before the pod is deleted. An entry is
keyed by the uid of the pod it is about, so a pass repeated after a conflict or a crash finds its
own decision on record and adds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.reconcile.actions import Action, Delete, Emit
from airflow_t9k.controller.reconcile.inplace import ANNOTATION_GROUP, authorized, can_restart_in_place, restart_in_place
from airflow_t9k.controller.reconcile.observe import Observed, is_deleting
from airflow_t9k.controller.reconcile.status import StatusBuilder, bounded, timestamp

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.slotstate import SlotState

Obj = dict[str, Any]

HISTORY = "restartHistory"
HISTORY_LIMIT = 20  # entries; the status object must stay small whatever happens in a night
# status.reason values a kubelet writes on a pod it ended for the node's sake, not the program's.
DISRUPTED_REASONS = frozenset({"Evicted", "Preempting", "NodeLost", "NodeShutdown"})


def disruption(pod: Obj | None) -> str | None:
    """Why the cluster took this pod away (e.g. ``EvictionByEvictionAPI``, ``Evicted``), or None."""
    status = (pod or {}).get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            return str(c.get("reason") or "DisruptionTarget")
    reason = status.get("reason")
    if status.get("phase") == "Failed" and reason in DISRUPTED_REASONS:
        return str(reason)
    return None


def overtaken(pod: Obj | None) -> str | None:
    """The group restart a pod was asked to join in place, when the pod ended before it could: its
    program saw the group break first (mpirun losing a daemon exits at once, while the request
    reaches the pod's agent through the kubelet's downward API refresh). Such a pod is part of that
    restart (recreated, nothing spent), not a failure. The key of that restart, or None.

    Asked and not yet restarted: every container's ``restartCount`` is below the restarts the
    controller allowed (an in-place restart restarts them all, and the request raised the count)."""
    meta = (pod or {}).get("metadata") or {}
    cause = (meta.get("annotations") or {}).get(ANNOTATION_GROUP)
    status = (pod or {}).get("status") or {}
    if pod is None or not cause or status.get("phase") not in ("Succeeded", "Failed"):
        return None
    restarts = max((int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []), default=0)
    return str(cause) if restarts < authorized(pod) else None


def describe(pod: Obj | None, cause: str) -> str:
    """The cause with the pod's own words, e.g. 'Evicted: The node was low on resource: memory.'"""
    status = (pod or {}).get("status") or {}
    said = status.get("message") or next(
        (c.get("message") for c in status.get("conditions") or [] if c.get("type") == "DisruptionTarget" and c.get("message")),
        None,
    )
    return bounded(f"{cause}: {str(said).strip()}", 300) if said else cause


def recorded(sb: StatusBuilder, key: str) -> bool:
    return any(e.get("podUID") == key for e in sb.new.get(HISTORY) or [])


def record(sb: StatusBuilder, replica: str, key: str, cause: str, counted: bool, exit_code: int | None = None,
           in_place: bool = False, reason: str | None = None, node: str | None = None) -> bool:  # fmt: skip
    """Append one replacement to the history unless ``key`` is there; True when it was new.
    ``in_place``: the pod was restarted on its node (reconcile/inplace.py), not recreated;
    ``reason``: a word for what decided it (``ProgressDeadlineExceeded``: reconcile/stall.py);
    ``node``: the node a retried failure happened on (reconcile/nodes.py counts them)."""
    if not key or recorded(sb, key):
        return False
    entry: Obj = {"time": timestamp(sb.now), "replica": replica, "cause": cause, "counted": counted, "podUID": key}
    if exit_code is not None:
        entry["exitCode"] = exit_code
    if in_place:
        entry["inPlace"] = True
    if reason:
        entry["reason"] = reason
    if node:
        entry["node"] = node
    history = [*(sb.new.get(HISTORY) or []), entry]
    sb.new[HISTORY] = history[-HISTORY_LIMIT:]
    return True


def group_disruption(states: list[SlotState]) -> SlotState | None:
    """The replica whose disruption restarts the group: evicted, or being taken away; or one that
    ended before it could join the group restart it was asked for (``overtaken``); or one that
    failed on a node the job avoids (reconcile/nodes.py)."""
    return next(
        (s for s in states if disruption(s.pod) is not None or overtaken(s.pod) is not None or s.node_caused is not None),
        None,
    )


def restart_group(
    sb: StatusBuilder, observed: Observed, cause: SlotState, events: list[Emit], in_place: bool = False
) -> list[Action]:
    """Every pod restarts; they come back together. One entry in the history, no restart spent.

    ``in_place``: a live pod built for it restarts on its node (its agent is asked to, once per
    disruption: reconcile/inplace.py); the disrupted pod and any other are deleted and recreated."""
    why = cause.node_caused or describe(
        cause.pod, disruption(cause.pod) or "ended before it could restart in place with its group"
    )
    # An overtaken pod belongs to the restart it was asked for: same key, so nothing is recorded
    # or asked twice, and the pod itself is recreated.
    key = overtaken(cause.pod) or uid_of(cause.pod) or ""
    stay = {n for n, p in observed.pods.items() if in_place and n != cause.slot.pod_name and can_restart_in_place(p)}
    if record(sb, f"{cause.slot.pod_name} (whole group)", key, why, counted=False, in_place=bool(stay)):
        how = f"{len(stay)} in place, the others recreated" if stay else "recreated"
        events.append(Emit("Warning", "GroupRestarting",
                           f"Replica {cause.slot.pod_name} was disrupted ({why}); every replica restarts together ({how}), "
                           "without spending the restart budget."))  # fmt: skip
    actions: list[Action] = []
    for name, pod in observed.pods.items():
        if name in stay:
            asked = restart_in_place(pod, key)
            actions += [asked] if asked is not None else []
        elif not is_deleting(pod):
            actions.append(Delete("Pod", name, uid_of(pod)))
    return actions


def replace_disrupted(sb: StatusBuilder, s: SlotState, events: list[Emit]) -> list[Action]:
    """A replica the cluster took away, or that failed on a node the job avoids: on record first,
    then replaced under the same count."""
    why = describe(s.pod, str(disruption(s.pod))) if s.node_caused is None else s.node_caused
    node = node_of(s.pod) if s.node_caused is not None else None
    if record(sb, s.slot.pod_name, uid_of(s.pod) or "", why, counted=False, exit_code=s.exit_code if node else None, node=node):
        events.append(
            Emit(
                "Warning",
                "ReplicaDisrupted",
                f"Replica {s.slot.pod_name} was disrupted ({why}); it is replaced without spending a restart.",
            )
        )
    # Being deleted by whoever disrupted it: it is created again once gone.
    return [] if is_deleting(s.pod or {}) else [Delete("Pod", s.slot.pod_name, uid_of(s.pod))]


def node_of(pod: Obj | None) -> str | None:
    name = ((pod or {}).get("spec") or {}).get("nodeName")
    return str(name) if name else None


def uid_of(obj: Obj | None) -> str | None:
    return (obj or {}).get("metadata", {}).get("uid")
