"""PyTorchTrainingJob on the real node: DDP over gloo from the environment the controller
injects, the same under torchrun's rendezvous, and Elastic scaling while torchrun trains."""

from __future__ import annotations

import json
import re

from tests.real.support import on_real_node, py
from tests.support.cluster import wait_until

KIND = "PyTorchTrainingJob"
API = "batch.tensorstack.dev/v1beta1"


def ddp_job(name: str, types: list[tuple[str, int]], **spec) -> dict:
    def replica(rtype: str, n: int) -> dict:
        container = {"name": "pytorch", "command": py("ddp.py"), "resources": {"limits": {"cpu": "400m", "memory": "1Gi"}}}
        return {
            "type": rtype,
            "replicas": n,
            "restartPolicy": "Never",
            "template": on_real_node({"spec": {"containers": [container]}}),
        }

    # Every replica's log is read after the end. The default clean-up (Unfinished) deletes the
    # replicas still tearing down when the one that decides the job (master or worker-0) has
    # ended: el-worker-2 was gone (404) once, on a loaded host (2026-11-28).
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": name},
            "spec": {"replicaSpecs": [replica(t, n) for t, n in types], "runPolicy": {"cleanUpPolicy": "None"},
                     **spec}}  # fmt: skip


def results(real, pods: list[str]) -> dict[str, dict[str, str]]:
    out = {}
    for pod in pods:
        line = [ln for ln in real.log(pod).splitlines() if ln.startswith("result ")]
        assert line, real.describe(pod)
        out[pod] = dict(kv.split("=") for kv in line[-1].split()[1:])
    return out


def test_ddp_from_injected_environment(jobs, controller, real):
    jobs.create(ddp_job("ddp", [("master", 1), ("worker", 1)]))
    job = jobs.wait_phase(KIND, "ddp", "Succeeded", "Failed", timeout=240)
    pods = ["ddp-master-0", "ddp-worker-0"]
    assert job["status"]["phase"] == "Succeeded", real.describe(*pods)
    got = results(real, pods)
    # Both ranks met (world 2), and DDP kept their weights identical.
    assert {p: r["rank"] for p, r in got.items()} == {"ddp-master-0": "0", "ddp-worker-0": "1"}
    assert {r["world"] for r in got.values()} == {"2"}
    assert got["ddp-master-0"]["checksum"] == got["ddp-worker-0"]["checksum"]
    first = re.search(r"epoch 0 loss ([\d.]+)", real.log("ddp-master-0"))
    assert first
    assert float(got["ddp-master-0"]["loss"]) < float(first.group(1)) / 10
    # MASTER_ADDR was the master's Service name, resolved by the cluster's DNS.
    assert "master=ddp-master-0:23456" in real.log("ddp-worker-0")
    # The program's termination message is the job's result.
    message = real.terminated("ddp-master-0").message
    assert json.loads(message) == {"loss": float(got["ddp-master-0"]["loss"])}


def test_ddp_under_torchrun_rendezvous(jobs, controller, real):
    job = ddp_job("tr", [("worker", 2)], torchrunConfig={"enabled": True, "procPerNode": "1", "maxRestarts": 0})
    for spec in job["spec"]["replicaSpecs"]:
        container = spec["template"]["spec"]["containers"][0]
        container["args"] = container.pop("command")[1:]  # torchrun runs the script; the command is ignored
    jobs.create(job)
    done = jobs.wait_phase(KIND, "tr", "Succeeded", "Failed", timeout=300)
    pods = ["tr-worker-0", "tr-worker-1"]
    assert done["status"]["phase"] == "Succeeded", real.describe(*pods)
    got = results(real, pods)
    assert sorted(r["rank"] for r in got.values()) == ["0", "1"]
    assert {r["world"] for r in got.values()} == {"2"}
    assert len({r["checksum"] for r in got.values()}) == 1


def test_elastic_scale_up_while_training_reforms_the_group(jobs, controller, real):
    job = ddp_job(
        "el",
        [("worker", 2)],
        torchrunConfig={"enabled": True, "procPerNode": "1", "maxRestarts": 5},
        elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 3, "expectedReplicas": 2},
    )
    container = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container.pop("command")
    container["args"] = py("elastic.py")[1:]
    container["env"].append({"name": "STEPS", "value": "40"})
    jobs.create(job)
    real.wait_log("el-worker-0", " world 2 ", timeout=180)
    # kubectl scale: the CRD's scale subresource.
    jobs.api.patch_namespaced_custom_object_scale("batch.tensorstack.dev", "v1beta1", jobs.ns, "pytorchtrainingjobs", "el",
                                                  {"spec": {"replicas": 3}})  # fmt: skip
    pods = ["el-worker-0", "el-worker-1", "el-worker-2"]
    wait_until(lambda: " world 3 " in real.log("el-worker-0"), timeout=180, what="the group re-formed with 3 workers")
    done = real.finished(jobs, KIND, "el", pods, timeout=240)
    assert done["status"]["phase"] == "Succeeded", real.describe(*pods)
    got = results(real, pods)
    # Every worker ends in the re-formed group of three, each with its own rank.
    assert sorted(r["rank"] for r in got.values()) == ["0", "1", "2"], got
    assert {r["world"] for r in got.values()} == {"3"}
