"""Priority without Kueue (issue 47, item 3), with the real kube-scheduler preempting on a full kwok node.

The controller runs with ``--priority-class-map``: a job's ``t9kScheduler.priority`` becomes its
pods' PriorityClass. A node of this test's own (tainted, so no other test's pod lands there) has
room for one 2-CPU replica. A low-priority job fills it; a high-priority job of the same size
comes: kube-scheduler preempts the low replica (``DisruptionTarget``/``PreemptionByScheduler``,
then deletes it) and binds the high one. The low job, whose restart policy is ``Never``, does not
fail: the preemption is a disruption, replaced without spending its budget, and its replica waits
Pending until the high job is gone, then runs again. Without the map (before issue 47) both jobs'
pods had priority 0 and the high job waited behind the low one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.cluster import wait_until
from tests.support.kubelet import POOL_TAINT, kwok_node

GJ = "GenericJob"


def pool_node(name: str, pool: str) -> client.V1Node:
    """A kwok node with room for one 2-CPU replica, tainted for this test's pods only."""
    return kwok_node(name, pool, cpu="2", memory="8Gi")


def gjob(name: str, priority: int, pool: str) -> dict:
    container = {"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                 "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}  # fmt: skip
    spec = {"containers": [container], "nodeSelector": {POOL_TAINT: pool},
            "tolerations": [{"key": POOL_TAINT, "operator": "Exists", "effect": "NoSchedule"}]}  # fmt: skip
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": name},
        "spec": {"scheduler": {"t9kScheduler": {"queue": "default", "priority": priority}},
                 "successRules": [], "failureRules": [{"worker": [0]}],
                 "replicaSpecs": [{"type": "worker", "replicas": 1, "restartPolicy": {"policy": "Never"},
                                   "template": {"spec": spec}}]},
    }  # fmt: skip


@pytest.fixture
def pool(api_client) -> Iterator[tuple[str, str, str]]:
    """(pool label, low class, high class): a one-replica node and two PriorityClasses of this test's own."""
    tag = uuid.uuid4().hex[:6]
    core, sched = client.CoreV1Api(api_client), client.SchedulingV1Api(api_client)
    node, low, high = f"prio-{tag}", f"t9k-test-low-{tag}", f"t9k-test-high-{tag}"
    core.create_node(pool_node(node, tag))
    sched.create_priority_class({"metadata": {"name": low}, "value": 100})
    sched.create_priority_class({"metadata": {"name": high}, "value": 1000})
    try:
        yield tag, low, high
    finally:
        for delete, name in ((core.delete_node, node), (sched.delete_priority_class, low), (sched.delete_priority_class, high)):
            try:
                delete(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def history(jobs, name: str) -> list[dict]:
    return (jobs.get(GJ, name).get("status") or {}).get("restartHistory") or []


def restart_counts(jobs, name: str) -> list[int]:
    return [e["restartCount"] for t in jobs.get(GJ, name)["status"]["tasks"] for e in t["status"]]


def bound(jobs, job: str, pod: str) -> client.V1Pod | None:
    p = jobs.live_pods(job).get(pod)
    return p if p is not None and p.spec.node_name else None


def test_a_high_priority_job_preempts_a_low_one_whose_budget_is_not_spent(jobs, controller_factory, pool):
    tag, low, high = pool
    controller_factory(f"--priority-class-map=0-49={low},50-100={high}")
    jobs.create(gjob("low", 10, tag))
    jobs.wait_phase(GJ, "low", "Running", timeout=60)
    victim = wait_until(lambda: bound(jobs, "low", "low-worker-0"), timeout=30, what="the low replica bound")
    assert (victim.spec.priority_class_name, victim.spec.priority) == (low, 100)
    said = jobs.get(GJ, "low")["status"]["scheduling"]
    assert said["priorityClassName"] == low
    assert said["priority"].startswith(f"10: PriorityClass {low} (value 100) on the pods"), said

    jobs.create(gjob("high", 90, tag))
    winner = wait_until(lambda: bound(jobs, "high", "high-worker-0"), timeout=90, what="the high replica bound by preemption")
    assert (winner.spec.priority_class_name, winner.spec.priority) == (high, 1000)
    jobs.wait_phase(GJ, "high", "Running", timeout=30)

    # The low replica was preempted: on record as a disruption, not a failure, and replaced.
    [entry] = wait_until(lambda: history(jobs, "low"), timeout=60, what="the low job's restart history")
    assert entry["replica"] == "low-worker-0"
    assert entry["podUID"] == victim.metadata.uid
    assert entry["cause"].startswith("PreemptionByScheduler"), entry
    assert entry["counted"] is False
    back = wait_until(lambda: (p := jobs.live_pods("low").get("low-worker-0")) and p.metadata.uid != victim.metadata.uid
                      and p, timeout=60, what="the low replica recreated")  # fmt: skip
    assert back.spec.priority_class_name == low
    assert not back.spec.node_name  # the node is the high job's now
    assert jobs.phase(GJ, "low") != "Failed"
    assert restart_counts(jobs, "low") == [0]  # restartPolicy Never: one counted restart would have failed it
    assert (jobs.condition(GJ, "low", "ReplicaFailure") or {}).get("status") != "True"
    assert "ReplicaDisrupted" in jobs.reasons("low", "ReplicaDisrupted")

    # The high job gone, the low one runs again, its budget whole.
    jobs.delete(GJ, "high")
    wait_until(lambda: bound(jobs, "low", "low-worker-0"), timeout=90, what="the low replica bound again")
    jobs.wait_phase(GJ, "low", "Running", timeout=30)
    assert restart_counts(jobs, "low") == [0]
    assert len(history(jobs, "low")) == 1


def test_a_missing_class_gives_no_class_and_says_so(jobs, controller_factory, pool):
    tag, low, _ = pool
    controller_factory(f"--priority-class-map=0-49={low},50-100=t9k-test-absent-{tag}")
    jobs.create(gjob("orphan", 70, tag))
    jobs.wait_phase(GJ, "orphan", "Running", timeout=60)
    pod = jobs.live_pods("orphan")["orphan-worker-0"]
    assert pod.spec.priority_class_name is None  # created, not refused for a class that does not exist
    said = jobs.get(GJ, "orphan")["status"]["scheduling"]
    assert "priorityClassName" not in said
    assert f"PriorityClass t9k-test-absent-{tag}" in said["priority"], said
    assert "PriorityNotEnforced" in jobs.reasons("orphan", "PriorityNotEnforced")
