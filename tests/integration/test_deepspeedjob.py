"""DeepSpeedJob against the real API server: the manual's example, outcomes, modes, bad input."""

from __future__ import annotations

import pytest

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated
from tests.support.modes import debug_pause_resume

KIND = "DeepSpeedJob"


def example(**spec):
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": KIND, "metadata": {"name": "ds"},
        "spec": {"config": {"slotsPerWorker": 1,
                            "run": {"python": ["/workspace/train.py", "--deepspeed", "--deepspeed_config=/workspace/ds.json"]}},
                 "worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [
                     {"name": "worker", "image": "deepspeed/deepspeed:v0.14.0", "env": [{"name": "NCCL_DEBUG", "value": "WARN"}],
                      "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
                 **spec},
    }  # fmt: skip


def test_example_produces_workers_hostfile_env_and_launch(jobs, controller):
    jobs.create(example())
    jobs.wait_phase(KIND, "ds", "Running")
    pods = jobs.pods("ds")
    assert sorted(pods) == ["ds-worker-0", "ds-worker-1", "ds-worker-2"]
    assert pods["ds-worker-2"].spec.containers[0].command == [
        "/usr/sbin/sshd",
        "-D",
        "-e",
        "-h",
        "/root/.ssh/ssh_host_ed25519_key",
        "-o",
        "StrictModes=no",
    ]
    assert (
        "exec deepspeed --hostfile /t9k/hostfile --launcher pdsh /workspace/train.py"
        in pods["ds-worker-0"].spec.containers[0].command[2]
    )
    data = jobs.core.read_namespaced_config_map("ds-deepspeed", jobs.ns).data
    assert data == {"hostfile": "ds-worker-0 slots=1\nds-worker-1 slots=1\nds-worker-2 slots=1\n"}  # no env values
    mounts = {m.mount_path for m in pods["ds-worker-1"].spec.containers[0].volume_mounts}
    assert {"/root/.ssh", "/t9k/hostfile"} <= mounts
    assert "for n in NCCL_DEBUG; do" in pods["ds-worker-0"].spec.containers[0].command[2]  # written from its own env


def test_worker_0_decides_after_a_restart(jobs, controller):
    jobs.create(example(runPolicy={"backoffLimit": 2, "cleanUpPolicy": "All"}))
    jobs.wait_phase(KIND, "ds", "Running")
    uid = jobs.pods("ds")["ds-worker-0"].metadata.uid
    set_pod_terminated(jobs.core, jobs.ns, "ds-worker-0", phase="Failed", exit_code=1)
    wait_until(lambda: (p := jobs.live_pods("ds").get("ds-worker-0")) is not None and p.metadata.uid != uid
               and p.status.phase == "Running", what="worker 0 restarted")  # fmt: skip
    set_pod_terminated(jobs.core, jobs.ns, "ds-worker-0", phase="Succeeded", exit_code=0)
    status = jobs.wait_phase(KIND, "ds", "Succeeded")["status"]
    assert status["backoffCount"] == 1
    wait_until(lambda: jobs.live_pods("ds") == {}, what="cleaned up")


def test_debug_then_pause_then_resume(jobs, controller):
    jobs.create(example(runMode={"debug": {"enabled": True}}))

    def debug(pods):
        assert {tuple(p.spec.containers[0].command) for p in pods.values()} == {
            ("/usr/sbin/sshd", "-D", "-e", "-h", "/root/.ssh/ssh_host_ed25519_key", "-o", "StrictModes=no")
        }

    def resumed(pods):
        assert "deepspeed" in pods["ds-worker-0"].spec.containers[0].command[2]

    debug_pause_resume(jobs, KIND, "ds", debug, resumed)


@pytest.mark.parametrize(
    ("change", "needle"),
    [({"worker": {"replicas": 0, "template": {"spec": {"containers": [{"name": "worker"}]}}}}, "replicas"),
     ({"worker": {"restartPolicy": "Sometimes", "template": {"spec": {"containers": [{"name": "worker"}]}}}}, "restartPolicy"),
     ({"elastic": {"enabled": True, "minReplicas": 3, "maxReplicas": 1}}, "minReplicas")],
    ids=["zero-workers", "bad-policy", "elastic-bounds"],
)  # fmt: skip
def test_rejected_at_admission(jobs, change, needle):
    assert needle in jobs.rejected(example(**change))


def test_bad_config_fails_clearly(jobs, controller):
    jobs.create(example(config={"run": {"python": ["a.py"], "module": ["b"]}}))
    jobs.wait_phase(KIND, "ds", "Failed")
    assert "exactly one of python, module or exec" in jobs.condition(KIND, "ds", "Failed")["message"]


def test_elastic_scale_subresource_rewrites_the_hostfile_and_relaunches(jobs, controller):
    jobs.create(example(elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 3}))
    jobs.wait_phase(KIND, "ds", "Running")
    launcher = jobs.pods("ds")["ds-worker-0"]
    assert "--elastic_training --min_elastic_nodes=2 --max_elastic_nodes=4" in launcher.spec.containers[0].command[2]
    keep = jobs.pods("ds")["ds-worker-1"].metadata.uid

    def hostfile():
        return jobs.core.read_namespaced_config_map("ds-deepspeed", jobs.ns).data["hostfile"]

    def scale(n):
        jobs.api.patch_namespaced_custom_object_scale("batch.tensorstack.dev", "v1beta1", jobs.ns, "deepspeedjobs", "ds",
                                                      {"spec": {"replicas": n}})  # fmt: skip

    def live():
        return sorted(n for n, p in jobs.live_pods("ds").items() if p.status.phase == "Running")

    scale(4)
    wait_until(lambda: live() == [f"ds-worker-{i}" for i in range(4)], what="scaled up to 4")
    assert hostfile() == "".join(f"ds-worker-{i} slots=1\n" for i in range(4))
    wait_until(lambda: jobs.live_pods("ds")["ds-worker-0"].metadata.uid != launcher.metadata.uid, what="launcher relaunched")
    scale(1)  # below minReplicas: clamped to 2
    wait_until(lambda: live() == ["ds-worker-0", "ds-worker-1"], what="scaled down to the minimum")
    assert hostfile() == "ds-worker-0 slots=1\nds-worker-1 slots=1\n"
    assert jobs.pods("ds")["ds-worker-1"].metadata.uid == keep  # sshd workers are never recreated

    def scale_status():
        return jobs.api.get_namespaced_custom_object_scale("batch.tensorstack.dev", "v1beta1", jobs.ns, "deepspeedjobs", "ds")[
            "status"
        ]

    # Replica counts are status detail: written with the next phase change or within --coalesce-status (1 s).
    wait_until(lambda: scale_status()["replicas"] == 2, timeout=10, what="scale status at 2 replicas")
    assert "job-name=ds" in scale_status()["selector"]
    status = jobs.get(KIND, "ds")["status"]
    assert status["backoffCount"] == 0
    assert status["phase"] == "Running"
    jobs.reasons("ds", "ReplicaRecreated")
