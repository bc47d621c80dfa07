"""Checkpoints on the real node (docs/checkpoints.md): a real PyTorch DDP training that
checkpoints each epoch resumes from its last checkpoint after a replica's pod is deleted, and
after an Airflow retry, and ends with exactly the numbers of an uninterrupted run.

The volume: the cluster has no storage provisioner, so the checkpoints live in a temporary
directory of this machine, which is the node: a ``hostPath`` volume source for the pod
deletion, and a PersistentVolume of that directory bound by hand to a claim for the Airflow
run (``checkpoint="claim"``, the usual form). An emptyDir would not do: it goes with the pod.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from airflow_t9k.api import checkpoint as ckpt
from tests.integration.test_airflow_dags import airflow_home, ok, run_dag  # noqa: F401  (fixtures)
from tests.real.support import on_real_node, py
from tests.support.cluster import wait_until

KIND = "PyTorchTrainingJob"
API = "batch.tensorstack.dev/v1beta1"
STEPS = 48  # 6 epochs of 8 steps: ckpt_train.py's defaults


@pytest.fixture
def host_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="t9k-ckpt-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def ckpt_job(name: str, host: Path, step_seconds: str = "0.3") -> dict:
    """Two DDP replicas (master, worker) that may restart: a deleted pod, and the peer whose
    collective broke with it, come back without spending the whole budget. ``step_seconds``
    between steps leaves time to interrupt one mid-run."""
    container = {"name": "pytorch", "command": py("ckpt_train.py"), "resources": {"limits": {"cpu": "400m", "memory": "1Gi"}},
                 "env": [{"name": "STEP_SECONDS", "value": step_seconds}]}  # fmt: skip
    replicas = [{"type": t, "replicas": 1, "restartPolicy": "OnFailure",
                 "template": on_real_node({"spec": {"containers": [container]}})} for t in ("master", "worker")]  # fmt: skip
    job = {"apiVersion": API, "kind": KIND, "metadata": {"name": name},
           "spec": {"replicaSpecs": replicas, "runPolicy": {"backoffLimit": 6}}}  # fmt: skip
    # What checkpoint={"volume": {"hostPath": ...}} makes the operator do, with its own function.
    where = ckpt.parse({"volume": {"hostPath": {"path": str(host), "type": "DirectoryOrCreate"}}})
    ckpt.apply(job, attempt=1, checkpoint=where, directory=name, grace_seconds=30)
    return job


def result(real, pod: str) -> dict:
    message = real.terminated(pod).message
    assert message, real.describe(pod)
    return json.loads(message)


def test_a_deleted_replica_resumes_from_its_checkpoint_with_the_same_result(jobs, controller, real, host_dir):
    jobs.create(ckpt_job("base", host_dir, step_seconds="0"))  # nothing interrupts this one
    done = real.finished(jobs, KIND, "base", ["base-master-0", "base-worker-0"], timeout=300)
    assert done["status"]["phase"] == "Succeeded", real.describe("base-master-0", "base-worker-0")
    base = result(real, "base-master-0")
    assert (base["resumed_from"], base["steps_run"], base["checkpoint"]) == (0, STEPS, f"step-{STEPS:06d}.pt")

    jobs.create(ckpt_job("cut", host_dir))
    # Two epochs in (checkpoints at steps 8 and 16), delete rank 0's pod.
    wait_until(lambda: (host_dir / "cut" / "step-000016.pt").exists(), timeout=240, what="the checkpoint of epoch 2")
    old = real.pod("cut-master-0")
    lines: list[str] = []

    def follow() -> None:  # the deleted pod's log goes with it: read it while it lasts
        stream = real.core.read_namespaced_pod_log("cut-master-0", real.ns, follow=True, _preload_content=False)
        for chunk in stream.stream(decode_content=True):
            lines.extend(chunk.decode().splitlines())

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    real.core.delete_namespaced_pod("cut-master-0", real.ns)
    reader.join(timeout=60)
    saved = [int(m.group(1)) for ln in lines if (m := re.match(r"SIGTERM: saved step (\d+)", ln))]
    assert saved, lines[-20:]
    assert saved[0] >= 16, lines[-20:]  # the grace period was time enough for one last checkpoint

    done = real.finished(jobs, KIND, "cut", ["cut-master-0", "cut-worker-0"], timeout=300)
    assert done["status"]["phase"] == "Succeeded", real.describe("cut-master-0", "cut-worker-0")
    new = real.pod("cut-master-0")
    assert new.metadata.uid != old.metadata.uid
    cut = result(real, "cut-master-0")
    print(f"uninterrupted: {base}\ninterrupted:   {cut}\nSIGTERM saved step {saved[0]}")
    # It went on from the checkpoint rank 0 saved on SIGTERM, not from scratch...
    assert (cut["resumed_from"], cut["steps_run"]) == (saved[0], STEPS - saved[0]), cut
    # ...and ended exactly where the uninterrupted run did (same weights, bit for bit).
    assert (cut["loss"], cut["checksum"]) == (base["loss"], base["checksum"])
    # The programs were told where they are: the attempt, and each pod's own restart count
    # (the worker failed for real when its peer went; the controller restarted it once).
    starts = {
        p: re.search(r"start rank=(\d) world=2 attempt=(\S+) restarts=(\S+)", real.log(p))
        for p in ("cut-master-0", "cut-worker-0")
    }
    assert all(starts.values()), real.describe("cut-master-0", "cut-worker-0")
    print({pod: m.group(0) for pod, m in starts.items()})
    for pod, m in starts.items():
        annotation = (real.pod(pod).metadata.annotations or {})["batch.tensorstack.dev/restart-count"]
        assert (m.group(2), m.group(3)) == ("1", annotation), (pod, m.group(0))
    assert int(starts["cut-worker-0"].group(3)) >= 1, starts["cut-worker-0"].group(0)


@pytest.fixture
def claim(core, namespace, host_dir) -> Iterator[str]:
    """A claim bound to a PersistentVolume of ``host_dir`` (no provisioner: bound by hand)."""
    pv = f"ckpt-{uuid.uuid4().hex[:8]}"
    core.create_persistent_volume(client.V1PersistentVolume(
        metadata=client.V1ObjectMeta(name=pv),
        spec=client.V1PersistentVolumeSpec(capacity={"storage": "1Gi"}, access_modes=["ReadWriteMany"], storage_class_name="",
                                           persistent_volume_reclaim_policy="Retain",
                                           host_path=client.V1HostPathVolumeSource(path=str(host_dir), type="Directory"),
                                           claim_ref=client.V1ObjectReference(namespace=namespace, name="ckpt"))))  # fmt: skip
    try:
        core.create_namespaced_persistent_volume_claim(namespace, client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name="ckpt"),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteMany"], storage_class_name="", volume_name=pv,
                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))  # fmt: skip
        wait_until(lambda: core.read_namespaced_persistent_volume_claim("ckpt", namespace).status.phase == "Bound", timeout=60,
                   what="the checkpoint claim bound")  # fmt: skip
        yield "ckpt"
    finally:
        core.delete_persistent_volume(pv)


def test_an_airflow_retry_resumes_from_the_checkpoint(run_dag, jobs, real, claim, host_dir):
    out = ok(run_dag("t9k_checkpoint_real"))
    # Try 1: rank 0 failed at step 20, after the checkpoint of epoch 2 (step 16); Airflow retried.
    assert "failing at step 20 on attempt 1" in out, out[-4000:]
    line = re.search(r"checkpoint compare: (\{.*\})", out)
    assert line, out[-4000:]
    report = json.loads(line.group(1))
    print(f"Airflow run: {report}")
    train, whole = report["results"]["train"], report["results"]["uninterrupted"]
    assert (train["resumed_from"], train["steps_run"]) == (16, STEPS - 16), train
    assert (whole["resumed_from"], whole["steps_run"]) == (0, STEPS), whole
    assert (train["loss"], train["checksum"]) == (whole["loss"], whole["checksum"])
    # The job's result named its last checkpoint; XCom ``checkpoint`` carries it.
    assert report["xcom_checkpoint"] == train["checkpoint"] == f"step-{STEPS:06d}.pt"
    # Try 2 ran its own job (<name>-t2), told T9K_ATTEMPT=2, in the directory try 1 wrote.
    tried = {j["metadata"]["name"]: j
             for j in jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns,
                                                             "pytorchtrainingjobs")["items"]}  # fmt: skip
    second = next(j for n, j in tried.items() if n.endswith("-t2"))
    env = {e["name"]: e.get("value") for e in second["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"]}
    assert env["T9K_ATTEMPT"] == "2"
    assert env["T9K_CHECKPOINT_DIR"] == "/t9k/checkpoint"
    sub_path = report["location"]["sub_path"]
    assert sub_path.startswith("airflow/t9k_checkpoint_real/")
    assert sub_path.endswith("/train")
    assert (host_dir / sub_path / f"step-{STEPS:06d}.pt").exists()
    assert sorted(p.name for p in (host_dir / sub_path).glob("step-*.pt"))[0] >= "step-000032.pt"  # the newest three are kept
