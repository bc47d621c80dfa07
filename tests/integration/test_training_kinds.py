"""TensorFlowTrainingJob and XGBoostTrainingJob against the real API server and controller."""

from __future__ import annotations

import json

import pytest

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated
from tests.support.modes import debug_pause_resume


def job(kind, container, name, *types, annotations=None, **spec):
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": kind, "metadata": {"name": name},
        "spec": {"replicaSpecs": [
            {"type": t, "replicas": n, "restartPolicy": "ExitCode",
             "template": {"metadata": {"annotations": annotations or {}},
                          "spec": {"containers": [{"name": container, "image": "img", "command": ["python", "train.py"]}]}}}
            for t, n in types], **spec},
    }  # fmt: skip


def tf(*types, **kw):
    return job("TensorFlowTrainingJob", "tensorflow", "tf", *(types or (("chief", 1), ("worker", 2), ("ps", 1))), **kw)


def xgb(*types, **kw):
    return job("XGBoostTrainingJob", "xgboost", "xg", *(types or (("master", 1), ("worker", 2))), **kw)


def env(jobs, job_name, pod):
    return {e.name: e.value for e in jobs.pods(job_name)[pod].spec.containers[0].env}


def test_tf_pods_services_and_tf_config_read_back(jobs, controller):
    jobs.create(tf())
    jobs.wait_phase("TensorFlowTrainingJob", "tf", "Running")
    assert sorted(jobs.pods("tf")) == ["tf-chief-0", "tf-ps-0", "tf-worker-0", "tf-worker-1"]
    config = json.loads(env(jobs, "tf", "tf-ps-0")["TF_CONFIG"])
    assert config["task"] == {"type": "ps", "index": 0}
    assert config["cluster"]["worker"] == ["tf-worker-0:2222", "tf-worker-1:2222"]
    services = sorted(s.metadata.name for s in jobs.core.list_namespaced_service(jobs.ns).items)
    assert services == ["tf-chief-0", "tf-ps-0", "tf-worker-0", "tf-worker-1"]


def test_tf_chief_decides_and_cleanup_removes_the_ps(jobs, controller):
    jobs.create(tf(runPolicy={"cleanUpPolicy": "Unfinished"}))
    jobs.wait_phase("TensorFlowTrainingJob", "tf", "Running")
    set_pod_terminated(jobs.core, jobs.ns, "tf-worker-0", phase="Succeeded", exit_code=0)
    set_pod_terminated(jobs.core, jobs.ns, "tf-chief-0", phase="Succeeded", exit_code=0)
    jobs.wait_phase("TensorFlowTrainingJob", "tf", "Succeeded")
    wait_until(lambda: "tf-ps-0" not in jobs.live_pods("tf"), what="running ps cleaned up")


def test_tf_exit_code_restart_then_backoff_exhausted(jobs, controller):
    jobs.create(tf(("chief", 1), ("worker", 1), runPolicy={"backoffLimit": 1}))
    jobs.wait_phase("TensorFlowTrainingJob", "tf", "Running")
    first = jobs.pods("tf")["tf-chief-0"].metadata.uid
    set_pod_terminated(jobs.core, jobs.ns, "tf-chief-0", phase="Failed", exit_code=137, reason="OOMKilled")
    wait_until(lambda: (p := jobs.live_pods("tf").get("tf-chief-0")) is not None and p.metadata.uid != first
               and p.status.phase == "Running", what="chief restarted")  # fmt: skip
    set_pod_terminated(jobs.core, jobs.ns, "tf-chief-0", phase="Failed", exit_code=137)
    failed = jobs.wait_phase("TensorFlowTrainingJob", "tf", "Failed")["status"]
    assert failed["backoffCount"] == 1
    assert '{ "chief": [0] }' in jobs.condition("TensorFlowTrainingJob", "tf", "Failed")["message"]


def test_tf_non_retryable_exit_code_fails_at_once(jobs, controller):
    jobs.create(tf(("worker", 2)))
    jobs.wait_phase("TensorFlowTrainingJob", "tf", "Running")
    set_pod_terminated(jobs.core, jobs.ns, "tf-worker-0", phase="Failed", exit_code=1)
    jobs.wait_phase("TensorFlowTrainingJob", "tf", "Failed")
    assert jobs.get("TensorFlowTrainingJob", "tf")["status"]["backoffCount"] == 0


@pytest.mark.parametrize("kind", ["TensorFlowTrainingJob", "XGBoostTrainingJob"])
def test_debug_and_pause(jobs, controller, kind):
    body = (tf if kind.startswith("Tensor") else xgb)(runMode={"debug": {"enabled": True}})
    jobs.create(body)

    def commands(expected):
        def check(pods):
            assert {tuple(p.spec.containers[0].command) for p in pods.values()} == {expected}

        return check

    debug_pause_resume(jobs, kind, body["metadata"]["name"], commands(("sleep", "inf")), commands(("python", "train.py")))


def test_xgboost_env_and_master_failure(jobs, controller):
    jobs.create(xgb(runPolicy={"backoffLimit": 0}))
    jobs.wait_phase("XGBoostTrainingJob", "xg", "Running")
    e = env(jobs, "xg", "xg-worker-1")
    assert (e["MASTER_ADDR"], e["MASTER_PORT"], e["RANK"], e["WORLD_SIZE"]) == ("xg-master-0", "9999", "2", "3")
    assert e["WORKER_ADDRS"] == "xg-worker-0,xg-worker-1"
    set_pod_terminated(jobs.core, jobs.ns, "xg-master-0", phase="Failed", exit_code=143)
    jobs.wait_phase("XGBoostTrainingJob", "xg", "Failed")


BAD_ADMISSION = [
    (tf(("master", 1)), "Unsupported value"),
    (tf(("chief", -1)), "replicas"),
    ({**tf(), "spec": {**tf()["spec"], "runPolicy": {"backoffLimit": -1}}}, "backoffLimit"),
    (xgb(("master", 1), ("ps", 1)), "Unsupported value"),
    ({**xgb(), "spec": {"replicaSpecs": [{**xgb()["spec"]["replicaSpecs"][0], "restartPolicy": "Sometimes"}]}}, "restartPolicy"),
]


@pytest.mark.parametrize(
    ("body", "needle"), BAD_ADMISSION, ids=["tf-type", "tf-replicas", "tf-backoff", "xgb-type", "xgb-policy"]
)
def test_rejected_at_admission(jobs, body, needle):
    assert needle in jobs.rejected(body)


@pytest.mark.parametrize(
    ("body", "needle"),
    [(tf(("ps", 1), ("evaluator", 1)), "needs a chief or at least one worker"),
     (job("TensorFlowTrainingJob", "trainer", "tf", ("worker", 1)), "container named 'tensorflow'"),
     (xgb(("worker", 2)), "needs a master replica")],
    ids=["tf-no-master", "tf-no-container", "xgb-no-master"],
)  # fmt: skip
def test_failed_with_a_condition(jobs, controller, body, needle):
    jobs.create(body)
    kind, name = body["kind"], body["metadata"]["name"]
    jobs.wait_phase(kind, name, "Failed")
    assert needle in jobs.condition(kind, name, "Failed")["message"]
