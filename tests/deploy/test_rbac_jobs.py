"""With nothing but the chart's RBAC, the deployed controller runs every path that needs a right:
jobs of several kinds to the end (kwok and real-node replicas), a job from a job template, a
real replica's progress lines in status.progress (pods/log), an evidence ConfigMap after a
failed job's clean-up (pods/log, events list), a Kueue-queued job admitted (Workloads, their
status, LocalQueues, ResourceFlavors), an MPI job's SSH Secret (secrets create), a BeamJob's
submit Job (batch jobs). The `release` fixture fails a test whose controller log shows a refusal,
naming the right."""

from __future__ import annotations

import json

from kubernetes import client

from tests.real.support import RealPods, ensure_code, on_real_node, py
from tests.support.cluster import wait_until
from tests.support.templates import Templates, template

V1 = "batch.tensorstack.dev/v1beta1"
SIM = "sim.t9k.test"
GK = "GenericJob"


def _pod(duration: str = "2s", **annotations: str) -> dict:
    return {"metadata": {"annotations": {f"{SIM}/duration": duration, **annotations}},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["train"]}]}}  # fmt: skip


def test_kwok_jobs_of_several_kinds_end_as_they_should(release, jobs):
    jobs.create({"apiVersion": V1, "kind": GK, "metadata": {"name": "gen"},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": _pod()}]}})  # fmt: skip
    jobs.create({"apiVersion": V1, "kind": "PyTorchTrainingJob", "metadata": {"name": "pt"},
                 "spec": {"replicaSpecs": [{"type": t, "replicas": n, "restartPolicy": "ExitCode",
                                            "template": {**_pod(), "spec": {"containers": [
                                                {"name": "pytorch", "image": "torch", "command": ["python", "t.py"]}]}}}
                                           for t, n in (("master", 1), ("worker", 2))]}})  # fmt: skip
    # MPIJob: its SSH Secret is created with secrets create alone (no get, list or watch).
    jobs.create({"apiVersion": V1, "kind": "MPIJob", "metadata": {"name": "mpi"},
                 "spec": {"worker": {"replicas": 2, "cmd": ["./run"], "template": {
                     **_pod(), "spec": {"containers": [{"name": "mpi-worker", "image": "mpi:1"}]}}}}})  # fmt: skip
    # BeamJob: its submit batch/v1 Job (batch jobs create, watch).
    beam = {"apiVersion": V1, "kind": "BeamJob", "metadata": {"name": "beam"},
            "spec": {"flinkClusterTemplate": {"spec": {"image": {"name": "flink:1"}, "taskManager": {"replicas": 1}}},
                     "jobTemplate": {"spec": {"template": {**_pod(), "spec": {"containers": [
                         {"name": "submit", "image": "beam", "command": ["python", "wc.py"]}]}}}}}}  # fmt: skip
    jobs.create(beam)
    for kind, name in ((GK, "gen"), ("PyTorchTrainingJob", "pt"), ("MPIJob", "mpi")):
        done = jobs.wait_phase(kind, name, "Succeeded", "Failed", timeout=90)
        assert done["status"]["phase"] == "Succeeded", (kind, done["status"])
    assert jobs.get("MPIJob", "mpi")["status"]["sshSecret"]["name"] == "mpi-ssh"
    secret = jobs.core.read_namespaced_secret("mpi-ssh", jobs.ns)  # read as the test's admin, not the controller
    assert secret.metadata.owner_references[0].name == "mpi"
    wait_until(lambda: jobs.get("BeamJob", "beam").get("status", {}).get("phase") in ("Running", "Succeeded", "Failed"),
               timeout=60, what="the BeamJob reconciled")  # fmt: skip
    batch = client.BatchV1Api(jobs.api.api_client).list_namespaced_job(jobs.ns).items
    assert [j.metadata.owner_references[0].name for j in batch] == ["beam"]


def test_a_job_from_a_job_template(release, jobs):
    Templates(jobs.api.api_client, jobs.ns).create(template("tpl", GK, _pod()))
    jobs.create({"apiVersion": V1, "kind": GK, "metadata": {"name": "from-tpl"},
                 "spec": {"templateRef": {"name": "tpl"}, "replicaSpecs": [{"type": "worker", "replicas": 1}]}})  # fmt: skip
    done = jobs.wait_phase(GK, "from-tpl", "Succeeded", "Failed", timeout=60)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    # Merged into the spec once, by the controller (update on the job), before any pod.
    assert done["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] == "busybox"


def test_evidence_is_kept_after_a_failed_jobs_clean_up(release, jobs):
    failing = _pod(**{f"{SIM}/fail-pods": "-worker-0$", f"{SIM}/exit-code": "3", f"{SIM}/message": "loss is nan"})
    jobs.create({"apiVersion": V1, "kind": GK,
                 "metadata": {"name": "ev", "annotations": {"batch.tensorstack.dev/evidence-log-lines": "20"}},
                 "spec": {"cleanUpPolicy": "All", "replicaSpecs": [{"type": "worker", "replicas": 2,
                                                                    "restartPolicy": {"policy": "Never"},
                                                                    "template": failing}]}})  # fmt: skip
    jobs.wait_phase(GK, "ev", "Failed", timeout=60)
    wait_until(lambda: jobs.live_pods("ev") == {}, timeout=60, what="pods cleaned up")
    cm = jobs.core.read_namespaced_config_map("ev-evidence", jobs.ns)
    summary = json.loads(cm.data["summary.json"])
    assert summary["rootCause"]["replica"] == "ev-worker-0"
    for p in ("ev-worker-0", "ev-worker-1"):  # pods/log get: the lines, not "(the log could not be read: ... forbidden)"
        lines = cm.data[f"{p}.log"].splitlines()
        assert lines, p
        assert not lines[0].startswith("(the log could not be read"), lines[0]
    assert "Failed" in [e["reason"] for e in json.loads(cm.data["events.json"])]  # events list


def test_a_kueue_queued_job_is_admitted(release, jobs):
    custom = client.CustomObjectsApi(jobs.api.api_client)
    custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", jobs.ns, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q"},
        "spec": {"clusterQueue": "cluster-queue"}})  # fmt: skip
    pod = _pod()
    need = {"cpu": "1", "memory": "1Gi"}
    pod["spec"]["containers"][0]["resources"] = {"requests": need, "limits": need}
    jobs.create({"apiVersion": V1, "kind": GK, "metadata": {"name": "queued"},
                 "spec": {"scheduler": {"t9kScheduler": {"queue": "q"}},
                          "replicaSpecs": [{"type": "worker", "replicas": 2, "template": pod}]}})  # fmt: skip
    done = jobs.wait_phase(GK, "queued", "Succeeded", "Failed", timeout=90)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert (jobs.condition(GK, "queued", "Admitted") or {}).get("status") == "True"
    wl = custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", jobs.ns, "workloads", "genericjob-queued")
    finished = wait_until(
        lambda: next((c for c in (custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", jobs.ns, "workloads",
                                                                      "genericjob-queued").get("status") or {})
                      .get("conditions") or [] if c["type"] == "Finished" and c["status"] == "True"), None),
        timeout=20, what="the Workload marked Finished (workloads/status update)")  # fmt: skip
    assert wl["metadata"]["ownerReferences"][0]["name"] == "queued"
    assert finished


def test_a_real_replicas_progress_reaches_the_status(release, jobs):
    """On the real node: the controller follows the replica's log through the API server and the
    kubelet (pods/log get) and writes status.progress, the log a stream on an HTTP/2 connection
    to the `kubernetes` Service."""
    ensure_code(jobs.core, jobs.ns)
    real = RealPods(jobs.core, jobs.ns)
    limits = {"limits": {"cpu": "200m", "memory": "200Mi"}}
    template = on_real_node(
        {"spec": {"containers": [{"name": "main", "command": py("progress.py", "20", "0.4"), "resources": limits}]}}
    )
    jobs.create({"apiVersion": V1, "kind": GK, "metadata": {"name": "prog"},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template}]}})  # fmt: skip
    seen = []

    def running_progress():
        p = (jobs.get(GK, "prog").get("status") or {}).get("progress")
        if p:
            seen.append(p["step"])
        return p and p["step"] < 20

    wait_until(running_progress, timeout=120, interval=0.5, what="status.progress while the replica runs")
    done = real.finished(jobs, GK, "prog", ["prog-worker-0"])
    assert done["status"]["phase"] == "Succeeded", real.describe("prog-worker-0")
    p = done["status"]["progress"]
    assert (p["replica"], p["step"], p["totalSteps"]) == ("prog-worker-0", 20, 20), p
    assert p["metrics"]["loss"] > 0
    leader_log = release.logs()[release.leader()]
    assert "replica logs: an HTTP/2 connection opened" in leader_log, leader_log[-3000:]
