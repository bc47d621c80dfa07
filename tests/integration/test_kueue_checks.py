"""Kueue admission checks and topology (issue 30, item 3), and a finished job's Workload deleted
(item 2), against a real Kueue (scripts/local-cluster.sh kueue).

The admission check is driven by the test itself: an AdmissionCheck whose controllerName no one
runs, made Active by the test as its controller would, and a ClusterQueue that requires it. Kueue
reserves quota and waits for the check; the test writes the check's state ``Ready`` with
``podSetUpdates``, as a ProvisioningRequest controller would for the nodes it provisioned.
Topology-aware scheduling uses Kueue's own ungater: a ResourceFlavor with a Topology over the kwok
nodes' hostnames, and a job whose template asks for one host.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

import pytest
from kubernetes.client.exceptions import ApiException

from tests.integration.test_kueue import GK, KUEUE, custom, gjob, kueue, wl_condition, workload  # noqa: F401
from tests.support.cluster import wait_until

NODE = {"cloud.example/provisioned": "pr-7"}
TOLERATE = {"key": "cloud.example/provisioned", "operator": "Exists", "effect": "NoSchedule"}
RESOURCES = [("cpu", "64"), ("memory", "256Gi"), ("nvidia.com/gpu", "4")]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster_queue(name: str, namespace: str, flavor: str = "default", check: str | None = None) -> dict:
    spec: dict = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                  "resourceGroups": [{"coveredResources": [r for r, _ in RESOURCES],
                                      "flavors": [{"name": flavor, "resources": [{"name": r, "nominalQuota": q}
                                                                                 for r, q in RESOURCES]}]}]}  # fmt: skip
    if check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


@contextlib.contextmanager
def cluster_objects(custom, *objects: tuple[str, dict]) -> Iterator[None]:
    """Cluster-scoped Kueue objects, named after the test's namespace, deleted afterwards."""
    made = []
    try:
        for plural, body in objects:
            custom.create_cluster_custom_object(*KUEUE, plural, body)
            made.append((plural, body["metadata"]["name"]))
        yield
    finally:
        for plural, name in reversed(made):
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(*KUEUE, plural, name, propagation_policy="Background")


def local_queue(custom, namespace: str, cq: str) -> None:
    custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "gpu"},
        "spec": {"clusterQueue": cq}})  # fmt: skip


@pytest.fixture
def checked_queue(kueue, custom, namespace) -> Iterator[str]:
    """LocalQueue ``gpu`` whose ClusterQueue requires an admission check that only the test drives."""
    check, cq = f"ac-{namespace}", f"cq-{namespace}"
    ac = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": check},
          "spec": {"controllerName": "t9k.test/driven-by-the-test"}}  # fmt: skip
    with cluster_objects(custom, ("admissionchecks", ac), ("clusterqueues", cluster_queue(cq, namespace, check=check))):
        # What the check's controller would say: the check is active, so the ClusterQueue is.
        active = {"type": "Active", "status": "True", "reason": "Active", "message": "driven by the test",
                  "lastTransitionTime": _now()}  # fmt: skip
        custom.patch_cluster_custom_object_status(*KUEUE, "admissionchecks", check, {"status": {"conditions": [active]}})
        local_queue(custom, namespace, cq)
        yield check


def reserved(custom, ns: str, name: str, check: str) -> dict | None:
    """The Workload once Kueue has reserved its quota and waits for the check."""
    wl = workload(custom, ns, name)
    states = {c.get("name"): c.get("state") for c in ((wl or {}).get("status") or {}).get("admissionChecks") or []}
    if wl_condition(wl, "QuotaReserved").get("status") == "True" and states.get(check) == "Pending":
        return wl
    return None


def ready(custom, ns: str, name: str, check: str, **update) -> None:
    body = {"status": {"admissionChecks": [{"name": check, "state": "Ready", "message": "provisioned by the test",
                                            "lastTransitionTime": _now(),
                                            "podSetUpdates": [{"name": "worker", **update}]}]}}  # fmt: skip
    custom.patch_namespaced_custom_object_status(*KUEUE, ns, "workloads", name, body)


def test_an_admission_checks_pod_set_updates_reach_every_pod(jobs, checked_queue, controller, custom):
    jobs.create(gjob("acj", replicas=2, duration=None))
    wait_until(lambda: reserved(custom, jobs.ns, "genericjob-acj", checked_queue), timeout=60, what="quota reserved")
    assert jobs.pods("acj") == {}  # no pod while the check is pending
    ready(custom, jobs.ns, "genericjob-acj", checked_queue, labels={"provisioned-by": "test"},
          annotations={"cloud.example/request": "pr-7"}, nodeSelector=NODE, tolerations=[TOLERATE])  # fmt: skip
    pods = wait_until(lambda: found if len(found := jobs.pods("acj")) == 2 else None, timeout=60, what="the admitted pods")
    for pod in pods.values():
        assert pod.metadata.labels["provisioned-by"] == "test"
        assert pod.metadata.labels["kueue.x-k8s.io/podset"] == "worker"
        assert pod.metadata.annotations["cloud.example/request"] == "pr-7"
        assert pod.spec.node_selector == NODE
        assert any(t.key == TOLERATE["key"] and t.operator == "Exists" for t in pod.spec.tolerations or [])


def test_an_admission_check_that_conflicts_with_the_job_fails_it_to_start(jobs, checked_queue, controller, custom):
    job = gjob("acx", replicas=2, duration=None)
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["nodeSelector"] = {"cloud.example/provisioned": "mine"}
    jobs.create(job)
    wait_until(lambda: reserved(custom, jobs.ns, "genericjob-acx", checked_queue), timeout=60, what="quota reserved")
    ready(custom, jobs.ns, "genericjob-acx", checked_queue, nodeSelector=NODE)
    failed = jobs.wait_phase(GK, "acx", "Failed", timeout=60)
    cond = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "FailedToStart"
    assert f"admission check {checked_queue} sets 'pr-7'" in cond["message"], cond
    assert "replica acx-worker-0 sets 'mine'" in cond["message"], cond
    assert jobs.pods("acx") == {}
    wait_until(lambda: wl_condition(workload(custom, jobs.ns, "genericjob-acx"), "Finished").get("status") == "True",
               what="the Workload Finished, its quota freed")  # fmt: skip


@pytest.fixture
def tas_queue(kueue, custom, namespace) -> Iterator[str]:
    """LocalQueue ``gpu`` on a flavor with a Topology over the kwok nodes' hostnames."""
    topology, flavor, cq = f"topo-{namespace}", f"tas-{namespace}", f"cq-{namespace}"
    objects = (
        ("topologies", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": topology},
                        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}),
        ("resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor},
                             "spec": {"nodeLabels": {"type": "kwok"}, "topologyName": topology}}),
        ("clusterqueues", cluster_queue(cq, namespace, flavor=flavor)),
    )  # fmt: skip
    with cluster_objects(custom, *objects):
        local_queue(custom, namespace, cq)
        yield "gpu"


def test_topology_aware_scheduling_places_the_pods_through_kueues_ungater(jobs, tas_queue, controller, custom):
    job = gjob("tas", replicas=2, duration=None)
    job["spec"]["replicaSpecs"][0]["template"]["metadata"]["annotations"] = {
        "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"
    }
    jobs.create(job)
    wl = wait_until(lambda: workload(custom, jobs.ns, "genericjob-tas"), what="the Workload")
    assert wl["spec"]["podSets"][0]["topologyRequest"] == {
        "required": "kubernetes.io/hostname", "podIndexLabel": "batch.tensorstack.dev/replica-index"}  # fmt: skip
    jobs.wait_phase(GK, "tas", "Running", timeout=90)
    pods = jobs.pods("tas")
    assert len(pods) == 2
    hosts = set()
    for pod in pods.values():
        # Kueue's topology ungater found our pods (workload annotation, podset label), gave each its
        # host and removed the gate: without them the pods would have stayed gated.
        assert pod.metadata.annotations["kueue.x-k8s.io/workload"] == "genericjob-tas"
        assert not pod.spec.scheduling_gates
        hosts.add(pod.spec.node_selector.get("kubernetes.io/hostname"))
        assert pod.spec.node_name == pod.spec.node_selector.get("kubernetes.io/hostname")
    assert len(hosts) == 1, hosts  # required topology: one host
    assert None not in hosts, hosts


def test_deleting_a_finished_jobs_workload_never_resurrects_it(jobs, checked_queue, controller, custom):
    jobs.create(gjob("fwl", replicas=1, duration="1s"))
    wait_until(lambda: reserved(custom, jobs.ns, "genericjob-fwl", checked_queue), timeout=60, what="quota reserved")
    ready(custom, jobs.ns, "genericjob-fwl", checked_queue)
    done = jobs.wait_phase(GK, "fwl", "Succeeded", timeout=90)
    wait_until(lambda: wl_condition(workload(custom, jobs.ns, "genericjob-fwl"), "Finished").get("status") == "True",
               what="the Workload Finished")  # fmt: skip
    before = controller.metric_sum("controller_runtime_reconcile_total")
    creates = controller.metric_sum("airflow_t9k_api_writes_total", verb="create")
    custom.delete_namespaced_custom_object(*KUEUE, jobs.ns, "workloads", "genericjob-fwl")
    wait_until(lambda: workload(custom, jobs.ns, "genericjob-fwl") is None, what="the Workload gone")
    wait_until(lambda: controller.metric_sum("controller_runtime_reconcile_total") > before
               and controller.metric_sum("workqueue_depth") == 0, what="the controller planned the job again")  # fmt: skip
    after = jobs.get(GK, "fwl")
    assert after["status"]["phase"] == "Succeeded"
    assert after["status"].get("tasks") == done["status"].get("tasks")
    assert workload(custom, jobs.ns, "genericjob-fwl") is None  # no new Workload queued
    assert controller.metric_sum("airflow_t9k_api_writes_total", verb="create") == creates
