"""Bad nodes avoided (issue 47, item 2; reconcile/nodes.py) against the real API server and
kube-scheduler, on kwok nodes each test adds for itself.

- Two retried failures on one node: the job's later pods carry a required affinity that excludes
  it, so the next one waits for another node and goes there once one is added (both failures
  are still counted), and another job's pods still go to that node (the list is the job's own).
- A node the platform names unhealthy (here a label, ``--unhealthy-node-condition label:...``),
  seen through the node watch alone (no pod changed): listed, its replica's failure there is free
  even with no restart left, and a job that only fits there waits, saying so, until a node fits.
"""

from __future__ import annotations

import uuid

from tests.support.cluster import wait_until
from tests.support.kubelet import POOL_TAINT, delete_nodes, kwok_node, set_pod_terminated

GJ = "GenericJob"
HEALTH = "t9k.test/gpu-health"


def job(name: str, pool: str, policy: dict, pin: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}],
                  "nodeSelector": {POOL_TAINT: pool},
                  "tolerations": [{"key": POOL_TAINT, "operator": "Exists", "effect": "NoSchedule"}]}  # fmt: skip
    if pin:  # the template's own required affinity: only that node
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pin]}]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "restartPolicy": policy,
                                       "template": {"spec": spec}}]}}  # fmt: skip


def placed(jobs, name: str, old_uid: str | None = None):
    """The job's pod once bound to a node (a new one when ``old_uid`` is given)."""
    pod = jobs.live_pods(name).get(f"{name}-worker-0")
    if pod is None or pod.metadata.uid == old_uid or not pod.spec.node_name or pod.status.phase != "Running":
        return None
    return pod


def ready(jobs, *names: str) -> None:
    """kwok marks a node Ready a moment after it is created; until then the scheduler passes it by."""

    def all_ready() -> bool:
        nodes = [jobs.core.read_node(n) for n in names]
        return all(any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) for n in nodes)

    wait_until(all_ready, timeout=30, what=f"nodes {names} Ready")


def status(jobs, name: str) -> dict:
    return jobs.get(GJ, name).get("status") or {}


def test_two_failures_on_one_node_move_the_job_off_it(jobs, controller):
    pool = f"rf-{uuid.uuid4().hex[:6]}"
    a, b = f"{pool}-a", f"{pool}-b"
    jobs.core.create_node(kwok_node(a, pool))  # node a alone: the first two pods can go nowhere else
    try:
        ready(jobs, a)
        jobs.create(job("rf", pool, {"policy": "OnFailure", "limit": 3}))
        first = wait_until(lambda: placed(jobs, "rf"), timeout=60, what="first pod running")
        assert first.spec.node_name == a
        set_pod_terminated(jobs.core, jobs.ns, "rf-worker-0", exit_code=1)
        second = wait_until(lambda: placed(jobs, "rf", first.metadata.uid), timeout=60, what="second pod running")
        assert second.spec.node_name == a  # one failure blames no node
        assert "avoidedNodes" not in status(jobs, "rf")
        set_pod_terminated(jobs.core, jobs.ns, "rf-worker-0", exit_code=1)
        # The third keeps off node a: with no other node it waits, and goes to the first one added.
        wait_until(lambda: (c := jobs.condition(GJ, "rf", "AvoidingNodes")) and c["reason"] == "OnlyAvoidedNodesFit",
                   timeout=60, what="the third pod waiting for a node other than a")  # fmt: skip
        jobs.core.create_node(kwok_node(b, pool))
        third = wait_until(lambda: placed(jobs, "rf", second.metadata.uid), timeout=60, what="third pod running")
        assert third.spec.node_name == b
        terms = third.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        assert [(f.key, f.operator, f.values) for t in terms for f in t.match_fields] == [("metadata.name", "NotIn", [a])]
        s = status(jobs, "rf")
        [entry] = s["avoidedNodes"]
        assert (entry["node"], entry["reason"]) == (a, "RepeatedFailures")
        assert [(h["counted"], h["node"]) for h in s["restartHistory"]] == [(True, a), (True, a)]
        assert [e["restartCount"] for t in s["tasks"] for e in t["status"]] == [2]  # a program's failures, as far as anyone knows
        wait_until(lambda: jobs.condition(GJ, "rf", "AvoidingNodes")["reason"] == "NodesAvoided", timeout=30,
                   what="no longer waiting")  # fmt: skip
        assert "NodeAvoided" in jobs.reasons("rf", "NodeAvoided")
        # Another job, pinned to node a by its own template: the list is rf's only, so it runs there.
        jobs.create(job("other", pool, {"policy": "OnFailure", "limit": 3}, pin=a))
        other = wait_until(lambda: placed(jobs, "other"), timeout=60, what="the other job's pod")
        assert other.spec.node_name == a
        terms = other.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        assert [(f.key, f.operator, f.values) for t in terms for f in t.match_fields] == [("metadata.name", "In", [a])]
        # The job ends: its list goes with it.
        set_pod_terminated(jobs.core, jobs.ns, "rf-worker-0", phase="Succeeded", exit_code=0)
        jobs.wait_phase(GJ, "rf", "Succeeded")
        assert "avoidedNodes" not in status(jobs, "rf")
        assert jobs.condition(GJ, "rf", "AvoidingNodes") is None
    finally:
        delete_nodes(jobs.core, [a, b])


def test_an_unhealthy_node_is_avoided_its_failure_is_free_and_a_job_with_nowhere_else_waits(jobs, controller_factory):
    controller_factory("--unhealthy-node-condition", f"label:{HEALTH}=bad")
    pool = f"un-{uuid.uuid4().hex[:6]}"
    a, b = f"{pool}-a", f"{pool}-b"
    jobs.core.create_node(kwok_node(a, pool))
    try:
        ready(jobs, a)
        jobs.create(job("un", pool, {"policy": "Never"}))  # no restart at all: only a free replacement goes on
        first = wait_until(lambda: placed(jobs, "un"), timeout=60, what="pod running")
        # Only the node changes: the watch of nodes brings the job's next pass.
        jobs.core.patch_node(a, {"metadata": {"labels": {HEALTH: "bad"}}})
        s = wait_until(lambda: (st := status(jobs, "un")).get("avoidedNodes") and st, timeout=30, what="node listed")
        [entry] = s["avoidedNodes"]
        assert (entry["node"], entry["reason"]) == (a, "NodeUnhealthy")
        assert f"label {HEALTH}=bad" in entry["message"]
        assert jobs.live_pods("un")["un-worker-0"].metadata.uid == first.metadata.uid  # a running replica stays
        set_pod_terminated(jobs.core, jobs.ns, "un-worker-0", exit_code=1)
        c = wait_until(lambda: (c := jobs.condition(GJ, "un", "AvoidingNodes")) and c["reason"] == "OnlyAvoidedNodesFit" and c,
                       timeout=60, what="waiting for a node that fits")  # fmt: skip
        assert "didn't match Pod's node affinity" in c["message"], c
        assert jobs.phase(GJ, "un") == "Running"
        [h] = status(jobs, "un")["restartHistory"]
        assert (h["counted"], h["node"]) == (False, a)
        jobs.core.create_node(kwok_node(b, pool))
        back = wait_until(lambda: placed(jobs, "un", first.metadata.uid), timeout=60, what="placed on the new node")
        assert back.spec.node_name == b
        wait_until(lambda: jobs.condition(GJ, "un", "AvoidingNodes")["reason"] == "NodesAvoided", timeout=30,
                   what="no longer waiting")  # fmt: skip
    finally:
        delete_nodes(jobs.core, [a, b])
