"""Gang scheduling with no add-on (issue 30, item 4), with the real kube-scheduler placing kwok pods.

The local cluster serves the Workload API (scheduling.k8s.io/v1alpha2, feature gates GenericWorkload
and GangScheduling): a multi-pod job that no Kueue LocalQueue admits owns a PodGroup, and its pods
are bound all together or not at all. Its two kwok nodes have 8 GPUs each, so three 8-GPU replicas
never fit: without the gang two of them would be bound and hold 16 GPUs for nothing.

Serial: the tests use every GPU of the cluster.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.support.cluster import wait_until

GJ = "GenericJob"
pytestmark = pytest.mark.serial


def gpu_job(name: str, replicas: int) -> dict:
    container = {"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                 "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}}  # fmt: skip
    replica = {"type": "worker", "replicas": replicas, "template": {"spec": {"containers": [container]}}}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": name},
            "spec": {"scheduler": {"t9kScheduler": {"queue": "gpu", "priority": 5}}, "replicaSpecs": [replica]}}  # fmt: skip


def podgroup(api_client, ns: str, name: str) -> dict | None:
    try:
        return client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            "scheduling.k8s.io", "v1alpha2", ns, "podgroups", name
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def scheduled(group: dict | None) -> dict | None:
    return next(
        (c for c in ((group or {}).get("status") or {}).get("conditions") or [] if c["type"] == "PodGroupScheduled"), None
    )


def test_a_gang_that_does_not_fit_places_none_of_its_pods(jobs, controller, api_client):
    jobs.create(gpu_job("big", 3))
    group = wait_until(lambda: podgroup(api_client, jobs.ns, "genericjob-big"), what="the job's PodGroup")
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert group["metadata"]["ownerReferences"][0]["name"] == "big"
    pods = wait_until(lambda: found if len(found := jobs.pods("big")) == 3 else None, what="three pods")
    assert {p.spec.scheduling_group.pod_group_name for p in pods.values()} == {"genericjob-big"}
    # kube-scheduler has tried the whole group and found no room for it.
    cond = wait_until(lambda: scheduled(podgroup(api_client, jobs.ns, "genericjob-big")), timeout=90,
                      what="the scheduler's verdict on the gang")  # fmt: skip
    assert cond["status"] == "False", cond
    assert not [p.metadata.name for p in jobs.pods("big").values() if p.spec.node_name], "a pod of the gang was bound"
    status = jobs.get(GJ, "big")["status"]
    assert status["phase"] == "Pending"
    said = status["scheduling"]
    assert said["effect"] == "GangOnly"
    assert "PodGroup genericjob-big" in said["gang"]
    assert said["queue"].startswith("gpu: ignored"), said  # no Kueue here: the queue does nothing
    assert said["priority"].startswith("5: ignored"), said
    wait_until(lambda: "Unschedulable" in (jobs.get(GJ, "big")["status"]["scheduling"].get("placement") or ""),
               what="the scheduler's verdict in the job's status")  # fmt: skip
    jobs.delete(GJ, "big")
    wait_until(lambda: not jobs.pods("big"), timeout=60, what="the gang's pods gone")


def test_a_gang_that_fits_is_placed_whole(jobs, controller, api_client):
    jobs.create(gpu_job("fits", 2))
    jobs.wait_phase(GJ, "fits", "Running", timeout=90)
    pods = jobs.pods("fits")
    assert len(pods) == 2
    assert all(p.spec.node_name for p in pods.values())
    cond = wait_until(lambda: scheduled(podgroup(api_client, jobs.ns, "genericjob-fits")), what="the scheduler's verdict")
    assert cond["status"] == "True", cond
