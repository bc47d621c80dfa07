"""PyTorchTrainingJob Elastic mode against the real API server: kubectl-style scaling through
the scale subresource, bounds, and the torchrun launch."""

from __future__ import annotations

from tests.support.cluster import wait_until

KIND, GROUP, VERSION, PLURAL = "PyTorchTrainingJob", "batch.tensorstack.dev", "v1beta1", "pytorchtrainingjobs"


def elastic(expected=3, low=2, high=5):
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": "el"},
        "spec": {"torchrunConfig": {"enabled": True, "procPerNode": "1", "maxRestarts": 5},
                 "elastic": {"enabled": True, "minReplicas": low, "maxReplicas": high, "expectedReplicas": expected},
                 "replicaSpecs": [{"type": "worker", "replicas": expected, "restartPolicy": "ExitCode",
                                   "template": {"spec": {"containers": [{"name": "pytorch", "image": "pytorch:2",
                                                                         "command": ["python"],
                                                                         "args": ["train.py"]}]}}}]},
    }  # fmt: skip


def scale(jobs, replicas):
    jobs.api.patch_namespaced_custom_object_scale(GROUP, VERSION, jobs.ns, PLURAL, "el", {"spec": {"replicas": replicas}})


def live(jobs):
    return sorted(jobs.live_pods("el"))


def test_scale_subresource_adds_and_removes_pods_within_bounds(jobs, controller):
    jobs.create(elastic(expected=3))
    jobs.wait_phase(KIND, "el", "Running")
    assert live(jobs) == ["el-worker-0", "el-worker-1", "el-worker-2"]
    cmd = jobs.pods("el")["el-worker-1"].spec.containers[0].command
    assert cmd[:2] == ["torchrun", "--nnodes=2:5"]
    assert "--rdzv_endpoint=el-worker-0:23456" in cmd
    assert cmd[-1] == "train.py"

    scale(jobs, 5)
    wait_until(lambda: live(jobs) == [f"el-worker-{i}" for i in range(5)], what="scaled up to 5")
    scale(jobs, 2)
    wait_until(lambda: live(jobs) == ["el-worker-0", "el-worker-1"], what="scaled down to 2")
    scale(jobs, 9)  # above maxReplicas: clamped
    wait_until(lambda: live(jobs) == [f"el-worker-{i}" for i in range(5)], what="clamped to 5")
    got = jobs.api.get_namespaced_custom_object_scale(GROUP, VERSION, jobs.ns, PLURAL, "el")
    wait_until(lambda: jobs.api.get_namespaced_custom_object_scale(GROUP, VERSION, jobs.ns, PLURAL,
                                                                   "el")["status"].get("replicas") == 5,
               what="scale status")  # fmt: skip
    assert got["spec"]["replicas"] == 9
    selector = jobs.api.get_namespaced_custom_object_scale(GROUP, VERSION, jobs.ns, PLURAL, "el")["status"]["selector"]
    assert selector == "batch.tensorstack.dev/job-name=el,batch.tensorstack.dev/job-kind=PyTorchTrainingJob"
    assert jobs.phase(KIND, "el") == "Running"


def test_elastic_bounds_are_validated_at_admission(jobs):
    assert "minReplicas must not exceed" in jobs.rejected(elastic(low=4, high=2))


def test_elastic_without_torchrun_fails_clearly(jobs, controller):
    body = elastic()
    body["spec"]["torchrunConfig"]["enabled"] = False
    jobs.create(body)
    jobs.wait_phase(KIND, "el", "Failed")
    assert "elastic mode needs torchrun" in jobs.condition(KIND, "el", "Failed")["message"]
