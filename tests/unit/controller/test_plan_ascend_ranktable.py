"""plan() for AscendJob's rank table: hccl.json in ConfigMap rings-config-<job>, as MindCluster builds it."""

from __future__ import annotations

import json

import pytest

from airflow_t9k.controller.reconcile import Create, Patch
from tests.builders import run
from tests.unit.controller.test_plan_ascend import apod, ascend, leader_service

DEVICE = "ascend.kubectl.kubernetes.io/ascend-910-configuration"


def with_devices(p: dict, host: str, ip: str, first_device: int) -> dict:
    p["metadata"]["annotations"][DEVICE] = json.dumps({
        "pod_name": p["metadata"]["name"], "server_id": host, "host_ip": host,
        "devices": [{"device_id": str(first_device + i),
                     "device_ip": f"192.168.100.{first_device + i}"} for i in range(2)]})  # fmt: skip
    p["status"]["podIP"] = ip
    return p


def configmap(p) -> dict:
    for a in p.actions:
        if isinstance(a, Create) and a.kind == "ConfigMap":
            return json.loads(a.manifest["data"]["hccl.json"])
        if isinstance(a, Patch) and a.kind == "ConfigMap":
            return json.loads(a.body["data"]["hccl.json"])
    raise AssertionError("no rank table written")


def test_pods_carry_their_rank_index_leader_first():
    p = run(ascend(), leader_service())
    indexes = {
        a.name: a.manifest["metadata"]["annotations"]["hccl/rankIndex"]
        for a in p.actions
        if isinstance(a, Create) and a.kind == "Pod"
    }
    assert indexes == {"ac-master-0": "0", "ac-worker-0": "1", "ac-worker-1": "2"}


def test_the_table_initializes_until_every_npu_pod_has_its_devices_and_ip():
    p = run(ascend(), leader_service())
    cm = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "ConfigMap")
    assert cm["metadata"]["name"] == "rings-config-ac"
    assert json.loads(cm["data"]["hccl.json"]) == {"status": "initializing", "version": "1.0"}
    partly = run(ascend(), leader_service(), with_devices(apod("ac-master-0"), "10.0.0.1", "10.244.0.5", 0), apod("ac-worker-0"))
    assert configmap(partly)["status"] == "initializing"


def test_the_completed_table_orders_servers_and_ranks_as_the_operator_does():
    pods = [with_devices(apod("ac-worker-1"), "10.0.0.3", "10.244.2.5", 0),
            with_devices(apod("ac-master-0"), "10.0.0.1", "10.244.0.5", 0),
            with_devices(apod("ac-worker-0"), "10.0.0.2", "10.244.1.5", 4)]  # fmt: skip
    table = configmap(run(ascend(), leader_service(), *pods))
    assert table["status"] == "completed"
    assert table["server_count"] == "3"
    assert table["version"] == "1.0"
    assert [s["container_ip"] for s in table["server_list"]] == ["10.244.0.5", "10.244.1.5", "10.244.2.5"]
    assert table["server_list"][1] == {
        "device": [{"device_id": "4", "device_ip": "192.168.100.4", "rank_id": "2"},
                   {"device_id": "5", "device_ip": "192.168.100.5", "rank_id": "3"}],
        "server_id": "10.0.0.2", "host_ip": "10.0.0.2", "container_ip": "10.244.1.5"}  # fmt: skip


@pytest.mark.parametrize(("framework", "types"), [("mindspore", (("Scheduler", 1), ("Worker", 2)))])
def test_a_leader_without_npus_is_not_a_server_and_workers_count_from_zero(framework, types):
    job = ascend(framework, *types)
    job["spec"]["replicaSpecs"]["Scheduler"]["template"]["spec"]["containers"][0].pop("resources")
    p = run(job, leader_service(framework))
    indexes = {
        a.name: a.manifest["metadata"]["annotations"]["hccl/rankIndex"]
        for a in p.actions
        if isinstance(a, Create) and a.kind == "Pod"
    }
    assert (indexes["ac-worker-0"], indexes["ac-worker-1"]) == ("0", "1")
    pods = [with_devices(apod("ac-worker-0"), "h0", "10.244.0.9", 0), with_devices(apod("ac-worker-1"), "h1", "10.244.0.8", 0)]
    table = configmap(run(job, leader_service(framework), apod("ac-scheduler-0"), *pods))
    assert [s["server_id"] for s in table["server_list"]] == ["h0", "h1"]


def test_a_job_without_npus_has_no_rank_table():
    assert run(ascend(npus=0), leader_service()).creates("ConfigMap") == []
