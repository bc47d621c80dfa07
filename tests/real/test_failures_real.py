"""Real failures on the real node: exit codes under the ExitCode policy, a real OOM kill, SIGTERM
within the grace period when a pod is deleted, and a termination message as the job's result."""

from __future__ import annotations

import threading
import time

from tests.real.support import on_real_node, py
from tests.support.cluster import wait_until

API = "batch.tensorstack.dev/v1beta1"


def generic(name: str, args: list[str], memory: str = "256Mi", grace: int = 5, **replica) -> dict:
    container = {"name": "main", "command": py("behave.py", *args), "resources": {"limits": {"cpu": "400m", "memory": memory}}}
    spec = {
        "type": "worker",
        "replicas": 1,
        "template": on_real_node({"spec": {"containers": [container]}}, grace=grace),
        **replica,
    }
    return {"apiVersion": API, "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [spec], "successRules": [{"worker": [0]}], "failureRules": [{"worker": [0]}]}}  # fmt: skip


def training(name: str, args: list[str], backoff: int) -> dict:
    """A one-replica PyTorchTrainingJob (a training kind: ExitCode is theirs) running behave.py."""
    container = {
        "name": "pytorch",
        "command": py("behave.py", *args),
        "resources": {"limits": {"cpu": "400m", "memory": "256Mi"}},
    }
    replica = {
        "type": "worker",
        "replicas": 1,
        "restartPolicy": "ExitCode",
        "template": on_real_node({"spec": {"containers": [container]}}),
    }
    return {"apiVersion": API, "kind": "PyTorchTrainingJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [replica], "runPolicy": {"backoffLimit": backoff}}}  # fmt: skip


def restarts(jobs, name: str) -> int:
    pod = jobs.pods(name).get(f"{name}-worker-0")
    return int((pod.metadata.annotations or {}).get("batch.tensorstack.dev/restart-count", "0")) if pod else -1


def test_exit_code_policy_restarts_138_and_not_3(jobs, controller, real):
    jobs.create(training("code3", ["exit", "3"], backoff=2))
    jobs.create(training("code138", ["exit", "138"], backoff=1))
    failed3 = real.finished(jobs, "PyTorchTrainingJob", "code3", ["code3-worker-0"], timeout=120)
    failed138 = real.finished(jobs, "PyTorchTrainingJob", "code138", ["code138-worker-0"], timeout=180)
    assert failed3["status"]["phase"] == "Failed"
    assert failed138["status"]["phase"] == "Failed"
    # 3 is a permanent failure: no restart; 138 asks for one: the replica ran twice.
    assert real.terminated("code3-worker-0").exit_code == 3
    assert restarts(jobs, "code3") == 0
    assert real.terminated("code138-worker-0").exit_code == 138
    assert restarts(jobs, "code138") == 1, failed138["status"]


def test_memory_limit_is_a_real_oom_kill(jobs, controller, real):
    jobs.create(generic("oom", ["oom"], memory="96Mi"))
    done = jobs.wait_phase("GenericJob", "oom", "Failed", "Succeeded", timeout=120)
    assert done["status"]["phase"] == "Failed"
    ended = real.terminated("oom-worker-0")
    assert (ended.reason, ended.exit_code) == ("OOMKilled", 137), ended
    conditions = " ".join(c.get("message", "") for c in done["status"].get("conditions") or [])
    assert "OOMKilled" in conditions, done["status"]


def test_deleted_pod_gets_sigterm_within_its_grace_period(jobs, controller, real):
    jobs.create(generic("term", ["sigterm", "600"], grace=20))
    real.wait_log("term-worker-0", "ready")
    lines: list[str] = []

    def follow() -> None:  # the log ends with the container; read it while it lasts
        stream = real.core.read_namespaced_pod_log("term-worker-0", real.ns, follow=True, _preload_content=False)
        for chunk in stream.stream(decode_content=True):
            lines.extend(chunk.decode().splitlines())

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    time.sleep(1)
    uid = real.pod("term-worker-0").metadata.uid
    t0 = time.monotonic()
    real.core.delete_namespaced_pod("term-worker-0", real.ns)
    reader.join(timeout=30)
    took = time.monotonic() - t0
    assert any(ln.startswith("got SIGTERM") for ln in lines), lines
    assert took < 15, f"the container took {took:.1f}s to end; its grace period is 20s and it exits on SIGTERM"
    # The controller replaces the deleted replica with a new pod.
    wait_until(lambda: (p := jobs.pods("term").get("term-worker-0")) is not None and p.metadata.uid != uid, timeout=60,
               what="a replacement pod")  # fmt: skip


def test_termination_message_is_the_jobs_result(jobs, controller, real):
    jobs.create(generic("msg", ["message", '{"metric": 0.875, "model_uri": "file:///models/7"}']))
    done = jobs.wait_phase("GenericJob", "msg", "Succeeded", "Failed", timeout=120)
    assert done["status"]["phase"] == "Succeeded", real.describe("msg-worker-0")
    assert real.terminated("msg-worker-0").message == '{"metric": 0.875, "model_uri": "file:///models/7"}'
    # The controller keeps it in the job's status, where the operator finds it once the pod is gone.
    assert '{"metric": 0.875, "model_uri": "file:///models/7"}' in messages(done["status"]), done["status"]


def messages(value: object) -> list[str]:
    """Every ``message`` of a container entry anywhere in a status."""
    if isinstance(value, dict):
        found = [value["message"]] if "exitCode" in value and "message" in value else []
        return found + [m for v in value.values() for m in messages(v)]
    if isinstance(value, list):
        return [m for v in value for m in messages(v)]
    return []
