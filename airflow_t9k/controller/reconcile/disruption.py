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

from typing import Any

from airflow_t9k.controller.reconcile.status import StatusBuilder, bounded, timestamp

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


def describe(pod: Obj | None, cause: str) -> str:
    """The cause with the pod's own words, e.g. 'Evicted: The node was low on resource: memory.'"""
    status = (pod or {}).get("status") or {}
    said = status.get("message") or next(
        (c.get("message") for c in status.get("conditions") or [] if c.get("type") == "DisruptionTarget" and c.get("message")), None)
    return bounded(f"{cause}: {str(said).strip()}", 300) if said else cause


def recorded(sb: StatusBuilder, key: str) -> bool:
    return any(e.get("podUID") == key for e in sb.new.get(HISTORY) or [])


def record(sb: StatusBuilder, replica: str, key: str, cause: str, counted: bool, exit_code: int | None = None) -> bool:
    """Append one replacement to the history unless ``key`` is there; True when it was new."""
    if not key or recorded(sb, key):
        return False
    entry: Obj = {"time": timestamp(sb.now), "replica": replica, "cause": cause, "counted": counted, "podUID": key}
    if exit_code is not None:
        entry["exitCode"] = exit_code
    history = [*(sb.new.get(HISTORY) or []), entry]
    sb.new[HISTORY] = history[-HISTORY_LIMIT:]
    return True
