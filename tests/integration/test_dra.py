"""DRA devices (issue 47, item 4) with the real API server, kube-controller-manager and kube-scheduler.

The test plays the DRA driver: it publishes a ResourceSlice of 4 devices of driver
``dra.t9k.test`` for a kwok node of its own (tainted, so no other test's pod lands there and no
other test's devices are allocated to its pods), under DeviceClass ``gpu.dra.t9k.test``. A
ResourceClaimTemplate asks for 2 of them; a GenericJob's replica names it. Kube-controller-manager
makes each pod its claim, kube-scheduler allocates the devices and binds the pod to the node that
has them, and kwok runs it (no kubelet prepares a device: nothing here needs one).

Checked: the pod carries the claim and gets 2 devices of the test's node; the job's status.usage
counts 2 × the run's seconds under ``gpu.dra.t9k.test`` (and the Prometheus counter the same):
this needs the controller to read ResourceClaimTemplates (``Observed.claim_templates``). With
Kueue: the Workload's podSet carries the claim; where the local Kueue was started with its DRA
feature and the mapping ``gpu.dra.t9k.test -> dra.t9k.test/gpu`` (scripts/local-cluster.sh; a
Kueue started before that needs ``kueue down`` and ``kueue up``), a ClusterQueue of 2
``dra.t9k.test/gpu`` admits one such job at a time.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from datetime import datetime

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.test_kueue import GK, KUEUE, custom, kueue, wl_condition, workload  # noqa: F401
from tests.support.cluster import ROOT, wait_until
from tests.support.kubelet import kwok_node

RESOURCE = ("resource.k8s.io", "v1")
DRIVER = "dra.t9k.test"
DEVICE_CLASS = "gpu.dra.t9k.test"
LOGICAL = "dra.t9k.test/gpu"  # the local Kueue's deviceClassMappings name for DEVICE_CLASS
KUEUE_CONFIG = ROOT / ".local-cluster" / "kueue" / "config.yaml"
POOL = "t9k.test/dra-pool"
DEVICES = 4
PER_POD = 2
SIM = "sim.t9k.test"


def kueue_counts_dra() -> bool:
    """Whether the local Kueue was started with DynamicResourceAllocation and the mapping (its config
    is written when it starts)."""
    with contextlib.suppress(OSError):
        text = KUEUE_CONFIG.read_text()
        return "DynamicResourceAllocation: true" in text and LOGICAL in text
    return False


@pytest.fixture(scope="session")
def device_class(api_client) -> str:
    """The DeviceClass of the test driver's devices: made once, left for the other workers' tests."""
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}  # fmt: skip
    try:
        client.CustomObjectsApi(api_client).create_cluster_custom_object(*RESOURCE, "deviceclasses", body)
    except ApiException as exc:
        if exc.status != 409:
            raise
    return DEVICE_CLASS


def dra_node(name: str, pool: str) -> client.V1Node:
    return kwok_node(name, pool, key=POOL)


@pytest.fixture
def devices(api_client, namespace, device_class) -> Iterator[str]:
    """A kwok node of this test's own with DEVICES devices on it, published as a driver publishes
    them (a ResourceSlice of one pool), and the namespace's ResourceClaimTemplate ``two-gpus``.
    Yields the pool's tag (the node's label value)."""
    tag = uuid.uuid4().hex[:6]
    node = f"dra-{tag}"
    core, custom_ = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    core.create_node(dra_node(node, tag))
    resource_slice = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(DEVICES)]},
    }  # fmt: skip
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "two-gpus"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS,
                                                                               "count": PER_POD}}]}}},
    }  # fmt: skip
    try:
        custom_.create_cluster_custom_object(*RESOURCE, "resourceslices", resource_slice)
        custom_.create_namespaced_custom_object(*RESOURCE, namespace, "resourceclaimtemplates", template)
        yield tag
    finally:
        for delete in (lambda: custom_.delete_cluster_custom_object(*RESOURCE, "resourceslices", f"{node}-{DRIVER}"),
                       lambda: core.delete_node(node)):  # fmt: skip
            try:
                delete()
            except ApiException as exc:
                if exc.status != 404:
                    raise


def dra_job(name: str, pool: str, queue: str | None = None, duration: str = "6s") -> dict:
    container = {"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                 "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}, "claims": [{"name": "gpu"}]}}  # fmt: skip
    spec = {"containers": [container], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}],
            "nodeSelector": {POOL: pool},
            "tolerations": [{"key": POOL, "operator": "Exists", "effect": "NoSchedule"}]}  # fmt: skip
    job: dict = {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GK,
        "metadata": {"name": name, "annotations": {"airflow-t9k.io/dag-id": "dra"}},
        "spec": {"successRules": [{"worker": [0]}], "failureRules": [], "cleanUpPolicy": "None",
                 "replicaSpecs": [{"type": "worker", "replicas": 1, "restartPolicy": {"policy": "Never"},
                                   "template": {"metadata": {"annotations": {f"{SIM}/duration": duration}}, "spec": spec}}]},
    }  # fmt: skip
    if queue is not None:
        job["spec"]["scheduler"] = {"t9kScheduler": {"queue": queue}}
    return job


def running(jobs, job: str) -> tuple[client.V1Pod, datetime]:
    """The replica's pod once it runs, and its container's start as the API served it."""

    def check():
        p = jobs.live_pods(job).get(f"{job}-worker-0")
        if p is None or not p.status.container_statuses:
            return None
        state = p.status.container_statuses[0].state
        return (p, state.running.started_at) if state.running and state.running.started_at else None

    return wait_until(check, timeout=60, what=f"{job}-worker-0 running")


def allocated(custom_, ns: str, pod: client.V1Pod) -> list[dict]:
    """The devices allocated to the pod's claim ``gpu`` (its ResourceClaim, made from the template)."""
    statuses = pod.status.resource_claim_statuses or []
    name = next(s.resource_claim_name for s in statuses if s.name == "gpu")
    claim = custom_.get_namespaced_custom_object(*RESOURCE, ns, "resourceclaims", name)
    reserved = [r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []]
    assert pod.metadata.uid in reserved
    return ((claim["status"].get("allocation") or {}).get("devices") or {}).get("results") or []


def test_a_replica_gets_its_dra_gpus_and_its_usage_counts_them(jobs, controller, devices, custom):
    jobs.create(dra_job("dra", devices))
    pod, started = running(jobs, "dra")
    assert [(c.name, c.resource_claim_template_name, c.resource_claim_name) for c in pod.spec.resource_claims] == [
        ("gpu", "two-gpus", None)
    ]
    assert pod.spec.node_name == f"dra-{devices}"  # the node whose slice has the devices
    results = allocated(custom, jobs.ns, pod)
    assert len(results) == PER_POD
    assert {(r["driver"], r["pool"], r["request"]) for r in results} == {(DRIVER, f"dra-{devices}", "gpu")}
    open_run = wait_until(lambda: ((jobs.get(GK, "dra").get("status") or {}).get("usage") or {}).get("open"),
                          timeout=30, what="the run on record")  # fmt: skip
    assert [r["accelerators"] for r in open_run.values()] == [{DEVICE_CLASS: PER_POD}]
    jobs.wait_phase(GK, "dra", "Succeeded", timeout=60)
    finished = jobs.pods("dra")["dra-worker-0"].status.container_statuses[0].state.terminated.finished_at
    run = (finished - started).total_seconds()
    assert run >= 5
    usage = jobs.get(GK, "dra")["status"]["usage"]
    assert usage["accelerators"] == {DEVICE_CLASS: PER_POD * run}
    assert usage["wasted"] == {DEVICE_CLASS: 0}
    labels = {"job_namespace": jobs.ns, "dag_id": "dra"}
    wait_until(lambda: controller.metric_sum("airflow_t9k_jobs_finished_total", **labels, phase="Succeeded") == 1,
               timeout=10, what="the finished job counted")  # fmt: skip
    assert controller.metric_sum("airflow_t9k_job_accelerator_seconds_total", **labels, resource=DEVICE_CLASS) == PER_POD * run


@pytest.fixture
def dra_queue(kueue, custom, namespace) -> Iterator[str]:
    """A ClusterQueue for this namespace with room for one pod's DRA GPUs (and plenty of cpu and
    memory), and LocalQueue ``dra`` in it."""
    cq = f"cq-dra-{namespace}"
    resources = [("cpu", "16"), ("memory", "64Gi"), (LOGICAL, str(PER_POD))]
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                 "resourceGroups": [{"coveredResources": [r for r, _ in resources],
                                     "flavors": [{"name": "default", "resources": [{"name": r, "nominalQuota": q}
                                                                                   for r, q in resources]}]}]}})  # fmt: skip
    custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "dra"},
        "spec": {"clusterQueue": cq}})  # fmt: skip
    try:
        yield "dra"
    finally:
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", cq, propagation_policy="Background")


def test_the_workload_podset_carries_the_claim_and_the_job_runs(jobs, controller, devices, dra_queue, custom):
    jobs.create(dra_job("first", devices, queue=dra_queue, duration="3s"))
    wl = wait_until(lambda: workload(custom, jobs.ns, "genericjob-first"), timeout=30, what="the Workload")
    template = wl["spec"]["podSets"][0]["template"]["spec"]
    assert template["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]
    assert template["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    pod, _ = running(jobs, "first")
    assert [c.resource_claim_template_name for c in pod.spec.resource_claims] == ["two-gpus"]
    assert (jobs.condition(GK, "first", "Admitted") or {}).get("status") == "True"
    jobs.wait_phase(GK, "first", "Succeeded", timeout=60)


def test_kueue_counts_the_dra_gpus_against_the_queues_quota(jobs, controller, devices, dra_queue, custom):
    """A queue of 2 DRA GPUs, two jobs of 2 each, 4 devices on the node: only Kueue's count of the
    claims keeps the second job's pod from existing while the first runs."""
    if not kueue_counts_dra():  # read after the kueue fixture, which may have started it
        pytest.skip("the local Kueue runs without DynamicResourceAllocation and the mapping to dra.t9k.test/gpu: "
                    "scripts/local-cluster.sh kueue down && scripts/local-cluster.sh kueue up")  # fmt: skip
    jobs.create(dra_job("first", devices, queue=dra_queue, duration="6s"))
    running(jobs, "first")
    wl = workload(custom, jobs.ns, "genericjob-first")
    usage = wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
    assert usage[LOGICAL] == str(PER_POD)
    jobs.create(dra_job("second", devices, queue=dra_queue, duration="2s"))
    message = wait_until(lambda: (jobs.condition(GK, "second", "Admitted") or {}).get("message", "").startswith("couldn't")
                         and jobs.condition(GK, "second", "Admitted")["message"], timeout=30, what="second waits")  # fmt: skip
    assert f"insufficient unused quota for {LOGICAL}" in message
    while jobs.phase(GK, "first") != "Succeeded":  # the whole time the first runs, the second has no pod
        assert jobs.pods("second") == {}, "a pod of the second job exists before its admission"
        time.sleep(0.2)
    # The job's end is written first, then its Workload is marked Finished (decide, then act).
    wait_until(lambda: wl_condition(workload(custom, jobs.ns, "genericjob-first"), "Finished").get("status") == "True",
               timeout=30, what="the first Workload Finished")  # fmt: skip
    jobs.wait_phase(GK, "second", "Succeeded", timeout=60)
