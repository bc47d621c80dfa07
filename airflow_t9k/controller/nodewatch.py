"""The nodes, watched for ``--avoid-bad-nodes`` (reconcile/nodes.py): what a pass reads of them, and
which jobs to plan again when a node's health changes.

A node's status changes every few seconds (heartbeats, images, resources) and most of that says
nothing about its health, so a change is passed on only when the verdict (``unhealthy``) moved:
then the jobs with a pod on that node are planned again, and no other. Nothing is requested per
job: the pods come from the controller's own caches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from airflow_t9k.controller.reconcile.nodes import NodeRule, unhealthy
from airflow_t9k.k8s.errors import ApiError, Forbidden
from airflow_t9k.k8s.informer import Informer

log = logging.getLogger(__name__)

Obj = dict[str, Any]
JobKey = tuple[str, str, str]
NODES = "/api/v1/nodes"
CONDITION_KEYS = ("type", "status", "reason", "message")


def slim_node(obj: Obj) -> Obj:
    """What the verdict reads: name and labels, cordon and taints, conditions without their times
    (a node object is kilobytes of images and addresses; thousands of nodes stay small)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    conditions = [{k: c[k] for k in CONDITION_KEYS if k in c} for c in status.get("conditions") or [] if isinstance(c, dict)]
    kept_spec = {k: spec[k] for k in ("unschedulable", "taints") if k in spec}
    kept_meta = {k: meta[k] for k in ("name", "uid", "labels", "resourceVersion") if k in meta}
    return {"kind": "Node", "metadata": kept_meta, "spec": kept_spec, "status": {"conditions": conditions}}


class NodeView(Mapping[str, Obj]):
    """The informer's cache by node name, without a copy (a pass reads one or two nodes). Read
    through the informer each time: a relist gives it a new cache."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer

    def __getitem__(self, name: str) -> Obj:
        return self.informer.cache[("", name)]

    def __iter__(self) -> Iterator[str]:
        return (name for _, name in list(self.informer.cache))

    def __len__(self) -> int:
        return len(self.informer.cache)


class NodeHealth:
    def __init__(self, kube: Any, rules: tuple[NodeRule, ...], watch_timeout: int,
                 jobs_on: Callable[[str], Iterable[JobKey]], requeue: Callable[[JobKey], None]) -> None:  # fmt: skip
        self.rules = rules
        self.jobs_on = jobs_on
        self.requeue = requeue
        self.verdicts: dict[str, str | None] = {}
        self.changes = 0  # health changes passed on (a metric for the load benchmark)
        self.informer = Informer(kube, NODES, kind="Node", handler=self._on_node, watch_timeout=watch_timeout,
                                 transform=slim_node)  # fmt: skip
        self.view = NodeView(self.informer)

    def _on_node(self, event: str, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if event == "DELETED" or not name:  # its pods are taken away, a disruption (reconcile/disruption.py)
            self.verdicts.pop(name, None)
            return
        before, why = self.verdicts.get(name), unhealthy(obj, self.rules)
        self.verdicts[name] = why
        # The first list only learns: every job is planned once the caches have synced anyway.
        if why == before or not self.informer.synced.is_set():
            return
        self.changes += 1
        log.info("node %s: %s", name, why or "healthy again")
        for key in set(self.jobs_on(name)):
            self.requeue(key)


def owner_key(pod: Obj, kinds: tuple[str, ...]) -> JobKey | None:
    meta = pod.get("metadata") or {}
    ref = next((r for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller")), None)
    if ref is None or ref.get("kind") not in kinds:
        return None
    return str(ref["kind"]), str(meta.get("namespace") or ""), str(ref.get("name") or "")


def jobs_with_pods_on(node: str, pod_caches: Iterable[Mapping[Any, Obj]], kinds: Iterable[str]) -> list[JobKey]:
    kinds = tuple(kinds)
    on_node = (pod for cache in pod_caches for pod in list(cache.values()) if (pod.get("spec") or {}).get("nodeName") == node)
    return [key for pod in on_node if (key := owner_key(pod, kinds)) is not None]


async def may_watch_nodes(kube: Any) -> str | None:
    """None where the controller may list nodes; else why bad nodes are not avoided."""
    try:
        await kube.request("GET", NODES, query={"limit": 1})
    except Forbidden:
        return "the controller may not list nodes (RBAC nodes: list, watch)"
    except ApiError as exc:
        return f"nodes could not be listed: {exc.message}"
    return None
