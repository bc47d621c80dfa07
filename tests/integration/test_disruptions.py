"""Disruptions are not failures (issue 23, point 1), against the real API server.

Each test takes a replica away the way the cluster does it: the Eviction API (as ``kubectl
drain`` and Kueue-less preemption do), the kubelet failing a pod under node pressure (written
through ``pods/status`` as the kubelet writes it; tests/real evicts through a real kubelet), and
a node that disappears (PodGC deletes its pods). A job whose restart policy is ``Never`` must
come through each with its replica replaced, no restart spent, and the cause on record.
"""

from __future__ import annotations

import uuid

from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.cluster import wait_until
from tests.support.kubelet import POOL_TAINT, kwok_node, set_pod_terminated

GJ = "GenericJob"


def gjob(name: str, replicas: int = 2, node_selector: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
        spec["tolerations"] = [{"key": POOL_TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": name},
        "spec": {"successRules": [], "failureRules": [{"worker": [0]}],
                 "replicaSpecs": [{"type": "worker", "replicas": replicas, "restartPolicy": {"policy": "Never"},
                                   "template": {"spec": spec}}]},
    }  # fmt: skip


def evict(core: client.CoreV1Api, namespace: str, name: str) -> None:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    core.create_namespaced_pod_eviction(name, namespace, body)


def history(jobs, kind: str, name: str) -> list[dict]:
    return (jobs.get(kind, name).get("status") or {}).get("restartHistory") or []


def restart_counts(jobs, kind: str, name: str) -> list[int]:
    return [e["restartCount"] for t in jobs.get(kind, name)["status"]["tasks"] for e in t["status"]]


def replaced(jobs, job: str, pod: str, old_uid: str) -> client.V1Pod | None:
    p = jobs.live_pods(job).get(pod)
    return p if p is not None and p.metadata.uid != old_uid else None


def test_an_eviction_through_the_api_replaces_the_replica_without_spending_a_restart(jobs, controller):
    jobs.create(gjob("ev"))
    jobs.wait_phase(GJ, "ev", "Running")
    old = jobs.pods("ev")["ev-worker-0"].metadata.uid
    evict(jobs.core, jobs.ns, "ev-worker-0")
    wait_until(lambda: replaced(jobs, "ev", "ev-worker-0", old), timeout=60, what="ev-worker-0 replaced")
    jobs.wait_phase(GJ, "ev", "Running")
    [entry] = wait_until(lambda: history(jobs, GJ, "ev"), what="restart history")
    assert entry["replica"] == "ev-worker-0"
    assert entry["podUID"] == old
    assert entry["counted"] is False
    assert entry["cause"].startswith("EvictionByEvictionAPI")
    assert restart_counts(jobs, GJ, "ev") == [0, 0]
    assert "ReplicaDisrupted" in [e.reason for e in jobs.events("ev")]


def test_a_kubelet_eviction_under_node_pressure_spends_no_restart(jobs, controller):
    # Before issue 23 this failed the job: policy Never, and the evicted pod counted as a failure.
    jobs.create(gjob("kp"))
    jobs.wait_phase(GJ, "kp", "Running")
    old = jobs.pods("kp")["kp-worker-1"].metadata.uid
    set_pod_terminated(jobs.core, jobs.ns, "kp-worker-1", phase="Failed", exit_code=137, reason="Evicted",
                       message="The node was low on resource: memory. Threshold quantity: 200Mi, available: 120Mi.")  # fmt: skip
    wait_until(lambda: replaced(jobs, "kp", "kp-worker-1", old), timeout=60, what="kp-worker-1 replaced")
    assert jobs.phase(GJ, "kp") == "Running"
    [entry] = history(jobs, GJ, "kp")
    assert entry["cause"].startswith("TerminationByKubelet: The node was low on resource: memory.")
    assert restart_counts(jobs, GJ, "kp") == [0, 0]
    assert (jobs.condition(GJ, "kp", "ReplicaFailure") or {}).get("status") != "True"


def test_a_replica_whose_node_is_lost_comes_back_elsewhere_without_spending_a_restart(jobs, controller):
    pool = f"lost-{uuid.uuid4().hex[:6]}"
    nodes = [f"{pool}-a", f"{pool}-b"]
    for n in nodes:
        jobs.core.create_node(kwok_node(n, pool))
    try:
        jobs.create(gjob("nl", replicas=1, node_selector={"t9k.test/pool": pool}))
        jobs.wait_phase(GJ, "nl", "Running", timeout=60)
        first = jobs.pods("nl")["nl-worker-0"]
        jobs.core.delete_node(first.spec.node_name)
        # PodGC deletes pods bound to a node that no longer exists (after its 40 s quarantine),
        # marking them DeletionByPodGC first.
        back = wait_until(lambda: replaced(jobs, "nl", "nl-worker-0", first.metadata.uid), timeout=150, interval=1,
                          what="nl-worker-0 replaced after its node was deleted")  # fmt: skip
        wait_until(lambda: jobs.live_pods("nl")["nl-worker-0"].spec.node_name, timeout=30, what="replacement scheduled")
        assert jobs.live_pods("nl")["nl-worker-0"].spec.node_name != first.spec.node_name
        assert back.metadata.uid != first.metadata.uid
        jobs.wait_phase(GJ, "nl", "Running", timeout=30)
        [entry] = wait_until(lambda: history(jobs, GJ, "nl"), what="restart history")
        assert entry["cause"].startswith("DeletionByPodGC")
        assert entry["counted"] is False
        assert restart_counts(jobs, GJ, "nl") == [0]
    finally:
        for n in nodes:
            try:
                jobs.core.delete_node(n)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def mpijob(name: str) -> dict:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "MPIJob", "metadata": {"name": name},
        "spec": {"worker": {"replicas": 2, "cmd": ["./train"],
                            "template": {"spec": {"containers": [{"name": "mpi-worker", "image": "mpi:1"}]}}},
                 "ssh": {"sshAuthMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"}, "mpiHome": "/usr/local"},
    }  # fmt: skip


def test_a_fixed_world_launch_restarts_every_replica_together_when_one_is_evicted(jobs, controller):
    jobs.create(mpijob("mg"))
    jobs.wait_phase("MPIJob", "mg", "Running")
    before = {n: p.metadata.uid for n, p in jobs.pods("mg").items()}
    assert sorted(before) == ["mg-launcher", "mg-worker-0", "mg-worker-1"]
    evict(jobs.core, jobs.ns, "mg-worker-1")

    def all_new() -> bool:
        live = jobs.live_pods("mg")
        return sorted(live) == sorted(before) and all(p.metadata.uid != before[n] for n, p in live.items())

    wait_until(all_new, timeout=60, what="launcher and both workers replaced")
    jobs.wait_phase("MPIJob", "mg", "Running")
    [entry] = history(jobs, "MPIJob", "mg")
    assert entry["replica"] == "mg-worker-1 (whole group)"
    assert entry["cause"].startswith("EvictionByEvictionAPI")
    assert restart_counts(jobs, "MPIJob", "mg") == [0, 0, 0]
    assert "GroupRestarting" in [e.reason for e in jobs.events("mg")]
