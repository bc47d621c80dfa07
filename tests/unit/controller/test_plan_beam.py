"""plan() for BeamJob: the Flink cluster as pods, the submit batch Job once it runs, its verdict."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.reconcile import Create, Observed, plan
from tests.builders import NOW, cond, evidence, pod, run

JM, TM0, TM1 = "b-flinkcluster-jobmanager-0", "b-flinkcluster-taskmanager-0", "b-flinkcluster-taskmanager-1"
SVC = "b-flinkcluster-jobmanager"


def beam(cleanup: bool | None = None, **cluster) -> dict:
    spec = {
        "flinkVersion": "1.10.1",
        "image": {"name": "t9kpublic/flink:1.10.1"},
        "jobManager": {"accessScope": "Cluster", "resources": {"limits": {"cpu": "1"}}},
        "taskManager": {"replicas": 2},
        "flinkProperties": {"taskmanager.numberOfTaskSlots": "1"},
        **cluster,
    }
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "BeamJob",
        "metadata": {"name": "b", "namespace": "ns", "uid": "uid-b", "generation": 1},
        "spec": {
            "flinkClusterTemplate": {"spec": spec},
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [
                {"name": "submit-job", "image": "beam", "command": ["python3"],
                 "args": ["-m", "apache_beam.examples.wordcount"]}]}}}},
        },
    }  # fmt: skip
    if cleanup is not None:
        job["spec"]["runPolicy"] = {"cleanUpCluster": cleanup}
    return job


def fpod(name: str, phase: str = "Running", exit_code: int | None = None) -> dict:
    return pod(name, phase, exit_code, rtype=name.split("-")[2])


def submit(condition: str | None = None, active: int = 1, reason: str = "", message: str = "") -> dict:
    conditions = [{"type": condition, "status": "True", "reason": reason, "message": message}] if condition else []
    return {
        "kind": "Job",
        "metadata": {"name": "b-batchjob", "uid": "uid-batch"},
        "status": {"active": active, "conditions": conditions},
    }


def svc(name: str = SVC, rtype: str = "jobmanager") -> dict:
    return {
        "kind": "Service",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"batch.tensorstack.dev/replica-type": rtype}},
    }


CLUSTER = (fpod(JM), fpod(TM0), fpod(TM1), svc(), svc(TM0, "taskmanager"), svc(TM1, "taskmanager"))


def manifest(p, name, kind="Pod"):
    return next(a.manifest for a in p.actions if isinstance(a, Create) and a.name == name and a.kind in (kind, "Job"))


def test_first_pass_creates_the_flink_cluster_but_not_the_submit_job():
    p = run(beam())
    assert p.creates("Pod") == [JM, TM0, TM1]
    assert p.creates("Service") == [SVC, TM0, TM1]
    assert p.creates("Job") == []
    assert p.status["phase"] == "Initializing"
    jm = manifest(p, JM)["spec"]["containers"][0]
    assert (jm["name"], jm["image"], jm["args"]) == ("jobmanager", "t9kpublic/flink:1.10.1", ["jobmanager"])
    assert [(x["name"], x["containerPort"]) for x in jm["ports"]] == [
        ("rpc", 6123),
        ("blob", 6124),
        ("query", 6125),
        ("ui", 8081),
    ]
    assert jm["resources"] == {"limits": {"cpu": "1"}}
    env = {e["name"]: e.get("value") for e in jm["env"]}
    assert env["JOB_MANAGER_RPC_ADDRESS"] == SVC
    assert env["FLINK_PROPERTIES"] == f"jobmanager.rpc.address: {SVC}\ntaskmanager.numberOfTaskSlots: 1\n"
    tm = manifest(p, TM1)["spec"]["containers"][0]
    assert tm["args"] == ["taskmanager"]
    assert [x["containerPort"] for x in tm["ports"]] == [6121, 6122]
    service = manifest(p, SVC, "Service")["spec"]
    assert "clusterIP" not in service
    assert [x["port"] for x in service["ports"]] == [6123, 6124, 6125, 8081]
    tm_svc = manifest(p, TM1, "Service")["spec"]
    assert tm_svc["clusterIP"] == "None"
    assert [x["port"] for x in tm_svc["ports"]] == [6121, 6122]
    assert cond(p, "ClusterRunning")["status"] == "False"


@pytest.mark.parametrize(("scope", "fields"), [("NodePort", {"type": "NodePort"}), ("Headless", {"clusterIP": "None"}),
                                               ("External", {"type": "LoadBalancer"}),
                                               ("VPC", {"type": "LoadBalancer"})])  # fmt: skip
def test_access_scope_decides_the_service_type(scope, fields):
    """With --allow-beam-external-service; without it only Cluster and Headless (issue 29, 5)."""
    job = copy.deepcopy(beam(jobManager={"accessScope": scope}))
    allowed = plan(job, Observed.of(evidence(job), beam_external_service=True), NOW)
    service = manifest(allowed, SVC, "Service")["spec"]
    assert {k: service.get(k) for k in fields} == fields
    default = run(beam(jobManager={"accessScope": scope}))
    if fields.get("type"):
        assert default.status["phase"] == "Failed", default
        assert not default.actions, default
        assert "--allow-beam-external-service" in cond(default, "Failed")["message"]
    else:
        assert manifest(default, SVC, "Service")["spec"]["clusterIP"] == "None"


def test_the_submit_job_follows_once_the_cluster_runs():
    assert run(beam(), fpod(JM), fpod(TM0, "Pending"), fpod(TM1), *CLUSTER[3:]).creates("Job") == []
    p = run(beam(), *CLUSTER, status={"phase": "Initializing"})
    assert p.creates("Job") == ["b-batchjob"]
    assert p.status["phase"] == "Running"
    job = manifest(p, "b-batchjob")
    assert job["apiVersion"] == "batch/v1"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "BeamJob"
    template = job["spec"]["template"]
    assert template["spec"]["restartPolicy"] == "OnFailure"
    assert template["metadata"]["labels"]["batch.tensorstack.dev/job-name"] == "b"
    assert template["spec"]["containers"][0]["env"] == [{"name": "FLINK_MASTER", "value": f"{SVC}:8081"}]
    assert cond(p, "ClusterRunning")["status"] == "True"
    assert p.status["jobURL"] == f"http://{SVC}.ns.svc:8081"
    assert [m["reference"]["name"] for m in p.status["flinkClusterStatus"]["taskManagerStatus"]] == [TM0, TM1]


@pytest.mark.parametrize(
    ("cleanup", "deleted"),
    [(True, [JM, TM0, TM1, SVC, TM0, TM1]), (False, []), (None, [])],
    ids=["clean-up", "keep", "default-keeps"],
)
def test_the_submit_job_completing_decides_success_and_clean_up(cleanup, deleted):
    running = run(beam(cleanup), *CLUSTER, submit(), status={"phase": "Running"})
    assert cond(running, "JobRunning")["status"] == "True"
    assert running.status["jobStatus"] == [{"phase": "Running", "reference": {"name": "b-batchjob", "uid": "uid-batch"}}]
    p = run(beam(cleanup), *CLUSTER, submit("Complete", active=0), status=running.status)
    assert p.status["phase"] == "Succeeded"
    assert cond(p, "Completed")["reason"] == "JobComplete"
    assert p.deletes() == deleted
    assert cond(p, "JobRunning")["status"] == "False"
    assert p.status["jobStatus"][0]["phase"] == "Succeeded"


def test_the_submit_job_failing_fails_the_beam_job_with_its_reason():
    failed = submit("Failed", active=0, reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit")
    p = run(beam(), *CLUSTER, failed, status={"phase": "Running"})
    assert p.status["phase"] == "Failed"
    c = cond(p, "Failed")
    assert c["reason"] == "BackoffLimitExceeded"
    assert "b-batchjob failed: Job has reached the specified backoff limit" in c["message"]


@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
def test_cluster_pods_come_back_whenever_they_end(phase):
    p = run(
        beam(),
        fpod(JM),
        fpod(TM0, phase, 1 if phase == "Failed" else 0),
        fpod(TM1),
        *CLUSTER[3:],
        submit(),
        status={"phase": "Running"},
    )
    assert p.deletes("Pod") == [TM0]
    assert p.status["phase"] == "Running"
    many = run(beam(), fpod(JM), {**fpod(TM0, "Failed", 137), "metadata": {**fpod(TM0)["metadata"],
               "annotations": {"batch.tensorstack.dev/restart-count": "500"}}}, fpod(TM1), *CLUSTER[3:],
               status={"phase": "Running"})  # fmt: skip
    assert many.deletes("Pod") == [TM0]


def _no_submit_container(job):
    job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"] = []
    return job


@pytest.mark.parametrize(
    ("job", "needle"),
    [
        (beam(image={}), "flinkClusterTemplate.spec.image.name is required"),
        (beam(taskManager={"replicas": 0}), "taskManager.replicas must be a positive integer"),
        (beam(jobManager={"accessScope": "Everywhere"}), "accessScope must be one of"),
        (beam(jobManager={"ports": {"ui": "eighty"}}), "Flink port ui must be an integer"),
        (_no_submit_container(beam()), "jobTemplate.spec.template.spec.containers is empty"),
        ({**beam(), "spec": {**beam()["spec"], "runMode": {"debug": {"enabled": True}}}}, "does not support Debug mode"),
    ],
    ids=["no-image", "no-taskmanagers", "access-scope", "port", "no-submit-container", "debug"],
)
def test_invalid_specs_fail_with_a_condition(job, needle):
    p = run(copy.deepcopy(job))
    assert p.actions == ()
    assert p.status["phase"] == "Failed"
    assert cond(p, "Failed")["reason"] == "InvalidSpec"
    assert needle in cond(p, "Failed")["message"]


def test_a_settled_status_is_not_rewritten_and_initializing_reads_back_as_pending():
    first = run(beam())
    assert run(beam(), status=first.status).status["phase"] == "Initializing"
    running = run(beam(), *CLUSTER, submit(), status={"phase": "Running"})
    again = run(beam(), *CLUSTER, submit(), status=running.status)
    assert again.status == running.status
    assert again.actions == ()
