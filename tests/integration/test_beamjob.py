"""BeamJob against the real API server, controller and kube-controller-manager's Job controller."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated

KIND = "BeamJob"
JM, TM0, TM1 = "bj-flinkcluster-jobmanager-0", "bj-flinkcluster-taskmanager-0", "bj-flinkcluster-taskmanager-1"


def beam(name="bj", cleanup=True, submit_spec=None, **cluster):
    """The T9k manual's wordcount example (job-kinds.md 1.6), with a cleanup flag."""
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": KIND, "metadata": {"name": name},
        "spec": {
            "flinkClusterTemplate": {"spec": {
                "flinkVersion": "1.10.1", "image": {"name": "t9kpublic/flink:1.10.1"},
                "jobManager": {"accessScope": "Cluster", "resources": {"limits": {"cpu": "100m", "memory": "1Gi"}}},
                "taskManager": {"replicas": 2, "resources": {"limits": {"cpu": "100m", "memory": "2Gi"}}},
                "flinkProperties": {"taskmanager.numberOfTaskSlots": "1"}, **cluster}},
            "jobTemplate": {"spec": {**(submit_spec or {}), "template": {"spec": {
                "containers": [{"name": "submit-job", "image": "t9kpublic/apache_beam_python3.7_sdk:2.22.0",
                                "command": ["python3"],
                                "args": ["-m", "apache_beam.examples.wordcount", "--runner=FlinkRunner",
                                         "--output=/tmp/counts"]}],
                "restartPolicy": "OnFailure" if not submit_spec else "Never"}}}},
            "runPolicy": {"cleanUpCluster": cleanup},
        },
    }  # fmt: skip


def submit_pods(jobs, name="bj"):
    pods = jobs.core.list_namespaced_pod(jobs.ns, label_selector=f"batch.kubernetes.io/job-name={name}-batchjob").items
    return [p for p in pods if not p.metadata.deletion_timestamp]


def test_manual_example_runs_the_cluster_then_the_submit_job_and_cleans_up(jobs, controller):
    jobs.create(beam())
    running = jobs.wait_phase(KIND, "bj", "Running")["status"]
    assert sorted(n for n in jobs.live_pods("bj") if "flinkcluster" in n) == [JM, TM0, TM1]
    jm = jobs.pods("bj")[JM].spec.containers[0]
    assert jm.args == ["jobmanager"]
    assert {e.name: e.value for e in jm.env}["JOB_MANAGER_RPC_ADDRESS"] == "bj-flinkcluster-jobmanager"
    svc = jobs.core.read_namespaced_service("bj-flinkcluster-jobmanager", jobs.ns)
    assert svc.spec.cluster_ip not in (None, "None")
    assert [p.port for p in svc.spec.ports] == [6123, 6124, 6125, 8081]
    assert running["jobURL"] == f"http://bj-flinkcluster-jobmanager.{jobs.ns}.svc:8081"
    tm = jobs.core.read_namespaced_service(TM1, jobs.ns)
    assert tm.spec.cluster_ip == "None"
    assert [p.port for p in tm.spec.ports] == [6121, 6122]
    batch = client.BatchV1Api(jobs.core.api_client)
    wait_until(lambda: len(submit_pods(jobs)) == 1, what="submit pod created by the Job controller")
    submit = batch.read_namespaced_job("bj-batchjob", jobs.ns)
    assert submit.metadata.owner_references[0].kind == KIND
    pod = submit_pods(jobs)[0]
    assert {e.name: e.value for e in pod.spec.containers[0].env}["FLINK_MASTER"] == "bj-flinkcluster-jobmanager:8081"
    assert pod.metadata.labels["batch.tensorstack.dev/job-name"] == "bj"  # so the Airflow task streams its log
    wait_until(
        lambda: pod.metadata.name in [p.metadata.name for p in submit_pods(jobs) if p.status.phase == "Running"],
        what="submit running",
    )
    wait_until(lambda: (jobs.condition(KIND, "bj", "JobRunning") or {}).get("status") == "True", what="JobRunning")
    set_pod_terminated(jobs.core, jobs.ns, pod.metadata.name, phase="Succeeded", exit_code=0)
    done = jobs.wait_phase(KIND, "bj", "Succeeded")["status"]
    assert jobs.condition(KIND, "bj", "Completed")["reason"] == "JobComplete"
    assert done["jobStatus"][0]["phase"] == "Succeeded"
    wait_until(lambda: not any(n.startswith("bj-flinkcluster") for n in jobs.live_pods("bj")), what="Flink cluster cleaned up")
    assert [s.metadata.name for s in jobs.core.list_namespaced_service(jobs.ns).items] == []  # TaskManager Services too


def test_submit_job_failure_fails_the_beam_job_and_keeps_the_cluster(jobs, controller):
    jobs.create(beam(cleanup=False, submit_spec={"backoffLimit": 0}))
    wait_until(lambda: [p for p in submit_pods(jobs) if p.status.phase == "Running"], what="submit pod running")
    set_pod_terminated(jobs.core, jobs.ns, submit_pods(jobs)[0].metadata.name, phase="Failed", exit_code=1)
    jobs.wait_phase(KIND, "bj", "Failed")
    failed = jobs.condition(KIND, "bj", "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "bj-batchjob failed" in failed["message"]
    assert {JM, TM0, TM1} <= set(jobs.live_pods("bj"))  # cleanUpCluster false keeps it


def test_a_failed_taskmanager_comes_back(jobs, controller):
    jobs.create(beam())
    jobs.wait_phase(KIND, "bj", "Running")
    before = jobs.pods("bj")[TM1].metadata.uid
    set_pod_terminated(jobs.core, jobs.ns, TM1, phase="Failed", exit_code=137)
    wait_until(
        lambda: (p := jobs.live_pods("bj").get(TM1)) is not None and p.metadata.uid != before, what="taskmanager recreated"
    )
    assert jobs.phase(KIND, "bj") == "Running"


def _with_cluster(**fields):
    body = beam("bad")
    body["spec"]["flinkClusterTemplate"]["spec"].update(fields)
    return body


ADMISSION = [
    ("run-mode", {**beam("bad"), "spec": {**beam("bad")["spec"], "runMode": {"debug": {"enabled": True}}}},
     "supports only Immediate mode"),
    ("no-image-name", _with_cluster(image={"pullPolicy": "Always"}), "image.name"),
    ("no-taskmanagers", _with_cluster(taskManager={"replicas": 0}), "taskManager.replicas"),
    ("access-scope", _with_cluster(jobManager={"accessScope": "Everywhere"}), "accessScope"),
    ("port-not-a-number", _with_cluster(jobManager={"ports": {"ui": "http"}}), "ports.ui"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "body", "needle"), ADMISSION, ids=[c[0] for c in ADMISSION])
def test_rejected_at_admission(jobs, case, body, needle):
    refusal = jobs.rejected(body)
    assert needle in refusal, refusal


def test_a_submit_job_the_api_server_refuses_fails_the_beam_job(jobs, controller):
    body = beam("bad")
    container = body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"containerPort": 99999}]  # passes our open schema; batch/v1 refuses it
    jobs.create(copy.deepcopy(body))
    jobs.create(beam("healthy"))
    jobs.wait_phase(KIND, "bad", "Failed")
    failed = jobs.condition(KIND, "bad", "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert "rejected Job bad-batchjob" in failed["message"]
    jobs.wait_phase(KIND, "healthy", "Running")
    assert controller.proc.poll() is None
