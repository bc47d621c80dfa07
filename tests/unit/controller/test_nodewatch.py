"""controller/nodewatch.py: what the cache keeps of a node, and which node events plan jobs again
(only a change of verdict, only the jobs with a pod there). The watch itself runs against the real
API server in tests/integration/test_bad_nodes.py; its cost in benchmarks/node_health.py."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_t9k.controller.nodewatch import NodeHealth, jobs_with_pods_on, slim_node
from airflow_t9k.controller.reconcile.nodes import parse_rule

Obj = dict[str, Any]


def node(name: str, ready: str = "True", heartbeat: str = "2026-12-02T00:00:00Z", **labels: str) -> Obj:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels, "resourceVersion": heartbeat,
                                          "managedFields": [{"manager": "kubelet"}]},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {"images": [{"names": ["big"], "sizeBytes": 1}] * 50,
                       "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady",
                                       "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-12-01"}]}}  # fmt: skip


def pod(name: str, on: str, kind: str = "GenericJob", job: str = "j") -> Obj:
    ref = {"kind": kind, "name": job, "controller": True, "uid": "u"}
    return {"metadata": {"name": name, "namespace": "ns", "ownerReferences": [ref]}, "spec": {"nodeName": on}}


def test_the_cache_keeps_what_the_verdict_reads_and_no_heartbeat():
    kept = slim_node(node("a", heartbeat="7", gpu="bad"))
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    assert kept == {"kind": "Node", "metadata": {"name": "a", "labels": {"gpu": "bad"}, "resourceVersion": "7"},
                    "spec": {}, "status": {"conditions": [ready]}}  # fmt: skip


class Health:
    def __init__(self, jobs: dict[str, list[tuple[str, str, str]]]) -> None:
        self.queued: list[tuple[str, str, str]] = []
        self.watch = NodeHealth(None, (parse_rule("label:gpu=bad"),), 60, lambda n: jobs.get(n, []), self.queued.append)

    def see(self, event: str, obj: Obj) -> list[tuple[str, str, str]]:
        self.queued.clear()
        self.watch._on_node(event, slim_node(obj))
        return sorted(self.queued)


J1, J2 = ("GenericJob", "ns", "j1"), ("MPIJob", "ns", "j2")


@pytest.mark.parametrize(
    ("events", "planned"),
    [
        ([("ADDED", node("a"))], []),
        ([("ADDED", node("a")), ("MODIFIED", node("a", heartbeat="later"))], []),  # a heartbeat: no pass
        ([("ADDED", node("a")), ("MODIFIED", node("a", ready="Unknown"))], [J1, J2]),
        ([("ADDED", node("a", ready="Unknown")), ("MODIFIED", node("a", ready="Unknown", heartbeat="x"))], []),
        ([("ADDED", node("a", ready="Unknown")), ("MODIFIED", node("a"))], [J1, J2]),  # healthy again: told too
        ([("ADDED", node("a")), ("MODIFIED", node("a", gpu="bad"))], [J1, J2]),  # the platform's rule
        ([("ADDED", node("a")), ("MODIFIED", node("a", gpu="good"))], []),
        ([("ADDED", node("a")), ("DELETED", node("a", ready="Unknown"))], []),  # its pods come back as disruptions
        ([("ADDED", node("b")), ("MODIFIED", node("b", ready="False"))], []),  # no job there
    ],
    ids=["added", "heartbeat", "not-ready", "still-not-ready", "ready-again", "rule", "rule-other-value", "deleted",
         "no-job"],
)  # fmt: skip
def test_only_a_change_of_verdict_plans_the_jobs_on_that_node(events, planned):
    h = Health({"a": [J1, J2, J1]})
    h.watch.informer.synced.set()
    *before, last = events
    for event, obj in before:
        h.see(event, obj)
    assert h.see(*last) == planned


def test_the_first_list_only_learns():
    h = Health({"a": [J1]})
    assert h.see("ADDED", node("a", ready="False")) == []  # not synced yet: every job gets a pass after the sync
    h.watch.informer.synced.set()
    assert h.see("MODIFIED", node("a", ready="False", heartbeat="x")) == []  # known already


def test_jobs_on_a_node_come_from_the_pod_caches_and_only_our_kinds():
    theirs = pod("p3", "a", kind="ReplicaSet", job="rs")
    caches = [{("ns", "p1"): pod("p1", "a", job="j1"), ("ns", "p2"): pod("p2", "b", job="j2")},
              {("ns", "p3"): theirs, ("ns", "p4"): pod("p4", "a", kind="MPIJob", job="m")}]  # fmt: skip
    found = jobs_with_pods_on("a", caches, ["GenericJob", "MPIJob"])
    assert sorted(found) == [("GenericJob", "ns", "j1"), ("MPIJob", "ns", "m")]


def test_the_view_a_pass_reads_follows_the_informer_across_a_relist():
    h = Health({})
    h.watch.informer.cache = {("", "a"): slim_node(node("a"))}  # a relist gives the informer a new dict
    assert list(h.watch.view) == ["a"]
    assert h.watch.view["a"]["metadata"]["name"] == "a"
    assert h.watch.view.get("b") is None
