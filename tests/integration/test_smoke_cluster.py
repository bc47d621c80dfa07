"""The local control plane is real: scheduling, garbage collection, and pod outcomes."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated


def make_pod(name: str, annotations: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations or {}),
        spec=client.V1PodSpec(
            restart_policy="Never",
            containers=[client.V1Container(name="main", image="busybox", command=["true"])],
        ),
    )


def phase_of(core: client.CoreV1Api, ns: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, ns).status.phase


def terminated(core: client.CoreV1Api, ns: str, name: str) -> client.V1ContainerStateTerminated | None:
    pod = core.read_namespaced_pod(name, ns)
    for cs in pod.status.container_statuses or []:
        if cs.state and cs.state.terminated:
            return cs.state.terminated
    return None


def test_nodes_are_ready_kwok_nodes_with_gpus(core):
    nodes = core.list_node(label_selector="type=kwok").items
    assert len(nodes) >= 2
    for node in nodes:
        ready = {c.type: c.status for c in node.status.conditions}["Ready"]
        assert ready == "True"
        assert node.status.allocatable["nvidia.com/gpu"] == "8"


def test_pod_is_scheduled_onto_a_kwok_node_and_runs(core, namespace):
    core.create_namespaced_pod(namespace, make_pod("runs"))
    wait_until(lambda: phase_of(core, namespace, "runs") == "Running", what="pod Running")
    pod = core.read_namespaced_pod("runs", namespace)
    assert pod.spec.node_name.startswith("kwok-node-")
    assert pod.status.pod_ip


def test_owned_child_is_garbage_collected_with_its_owner(core, namespace):
    owner = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner")))
    ref = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid)
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="child", owner_references=[ref]))
    )
    core.delete_namespaced_config_map("owner", namespace)

    def child_gone() -> bool:
        try:
            core.read_namespaced_config_map("child", namespace)
            return False
        except ApiException as exc:
            return exc.status == 404

    wait_until(child_gone, timeout=60, what="garbage collection of the child")


def test_annotations_drive_failure_with_exit_code_and_success(core, namespace):
    sim = {"sim.t9k.test/duration": "1s", "sim.t9k.test/fail-pods": "-bad$", "sim.t9k.test/exit-code": "137"}
    core.create_namespaced_pod(namespace, make_pod("sim-bad", sim))
    core.create_namespaced_pod(namespace, make_pod("sim-good", sim))
    wait_until(lambda: phase_of(core, namespace, "sim-bad") == "Failed", what="sim-bad Failed")
    wait_until(lambda: phase_of(core, namespace, "sim-good") == "Succeeded", what="sim-good Succeeded")
    assert terminated(core, namespace, "sim-bad").exit_code == 137
    assert terminated(core, namespace, "sim-good").exit_code == 0


def test_annotations_simulate_restarts_before_finishing(core, namespace):
    sim = {"sim.t9k.test/duration": "1s", "sim.t9k.test/restarts": "2"}
    core.create_namespaced_pod(namespace, make_pod("restarts", sim))
    wait_until(lambda: phase_of(core, namespace, "restarts") == "Succeeded", timeout=30, what="Succeeded")
    cs = core.read_namespaced_pod("restarts", namespace).status.container_statuses[0]
    assert cs.restart_count == 2


def test_pod_without_duration_keeps_running(core, namespace):
    core.create_namespaced_pod(namespace, make_pod("forever", {"sim.t9k.test/fail-pods": ".*"}))
    wait_until(lambda: phase_of(core, namespace, "forever") == "Running", what="Running")
    import time

    time.sleep(3)
    assert phase_of(core, namespace, "forever") == "Running"


def test_kubelet_helper_sets_oomkilled(core, namespace):
    core.create_namespaced_pod(namespace, make_pod("oom"))
    wait_until(lambda: phase_of(core, namespace, "oom") == "Running", what="Running")
    set_pod_terminated(core, namespace, "oom", phase="Failed", exit_code=137, reason="OOMKilled", restart_count=3)
    pod = core.read_namespaced_pod("oom", namespace)
    assert pod.status.phase == "Failed"
    cs = pod.status.container_statuses[0]
    assert (cs.state.terminated.exit_code, cs.state.terminated.reason, cs.restart_count) == (137, "OOMKilled", 3)


def test_kubelet_helper_sets_evicted_on_the_pod(core, namespace):
    core.create_namespaced_pod(namespace, make_pod("evicted"))
    wait_until(lambda: phase_of(core, namespace, "evicted") == "Running", what="Running")
    set_pod_terminated(core, namespace, "evicted", phase="Failed", exit_code=137, reason="Evicted")
    pod = core.read_namespaced_pod("evicted", namespace)
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")


def _reserved(text: str) -> set[int]:
    ports: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        low, _, high = part.partition("-")
        ports.update(range(int(low), int(high or low) + 1))
    return ports


def test_the_api_servers_port_is_reserved_while_the_cluster_runs(cluster):
    """scripts/local-cluster.sh keeps its fixed ports (in the kernel's ephemeral range) from being
    handed out while it runs: a test's free port was once the API server's, and an API server
    started again after an outage could find its port taken by an outgoing connection."""
    path = "/proc/sys/net/ipv4/ip_local_reserved_ports"
    if cluster.external or not os.access(path, os.W_OK):
        pytest.skip("the local cluster reserves its ports only as root (scripts/local-cluster.sh reserve_ports)")
    server = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    port = urlsplit(server).port
    with open(path) as f:
        assert port in _reserved(f.read())
