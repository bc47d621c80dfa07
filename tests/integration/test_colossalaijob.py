"""ColossalAIJob against a real API server: the seed example, SSH wiring, launcher-decided outcome."""

from __future__ import annotations

import base64

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated
from tests.support.manifests import manifest
from tests.support.modes import debug_pause_resume

KIND = "ColossalAIJob"


def test_seed_example_produces_launcher_workers_secret_hostfile(jobs, controller):
    jobs.create(manifest("colossalaijob-example"))
    wait_until(lambda: len(jobs.pods("colossalai-example")) == 3, timeout=30, what="three pods")
    pods = jobs.pods("colossalai-example")
    assert sorted(pods) == ["colossalai-example-launcher", "colossalai-example-worker-0", "colossalai-example-worker-1"]

    worker = pods["colossalai-example-worker-0"].spec.containers[0]
    assert worker.name == "worker"
    assert worker.command == ["/usr/sbin/sshd", "-D", "-e", "-h", "/root/.ssh/ssh_host_ed25519_key", "-o", "StrictModes=no"]
    assert {(m.name, m.mount_path) for m in worker.volume_mounts} >= {("code", "/workspace"), ("t9k-ssh", "/root/.ssh")}
    assert worker.resources.limits["nvidia.com/gpu"] == "1"

    launcher = pods["colossalai-example-launcher"].spec.containers[0]
    assert launcher.image == "hpcaitech/colossalai:0.3.0"
    assert launcher.working_dir == "/workspace"
    assert launcher.resources.requests == {"cpu": "500m", "memory": "1Gi"}
    assert (
        "colossalai run --nproc_per_node 1 --hostfile /etc/t9k/hostfile --master_addr colossalai-example-worker-0"
        in launcher.command[2]
    )
    assert launcher.command[2].endswith("train.py arg1")

    secret = jobs.core.read_namespaced_secret("colossalai-example-ssh", jobs.ns)
    assert set(secret.data) == {"id_ed25519", "id_ed25519.pub", "authorized_keys", "config", "ssh_host_ed25519_key",
                                "ssh_host_ed25519_key.pub", "known_hosts"}  # fmt: skip
    assert base64.b64decode(secret.data["authorized_keys"]).startswith(b"ssh-ed25519 ")
    assert b"OPENSSH PRIVATE KEY" in base64.b64decode(secret.data["id_ed25519"])
    hostfile = jobs.core.read_namespaced_config_map("colossalai-example-hostfile", jobs.ns).data["hostfile"]
    assert hostfile == "colossalai-example-worker-0\ncolossalai-example-worker-1\n"
    services = sorted(s.metadata.name for s in jobs.core.list_namespaced_service(jobs.ns).items)
    assert services == ["colossalai-example-worker-0", "colossalai-example-worker-1"]


def _job(name="cai", **extra):
    job = manifest("colossalaijob-example")
    job["metadata"]["name"] = name
    job["spec"]["worker"]["template"]["spec"].pop("volumes")  # no PVC here: let the pods run
    job["spec"]["worker"]["template"]["spec"]["containers"][0].pop("volumeMounts")
    job["spec"].update(extra)
    return job


def test_launcher_success_decides_and_cleans_up_workers(jobs, controller):
    jobs.create(_job(runPolicy={"cleanUpWorkers": True}))
    jobs.wait_phase(KIND, "cai", "Running")
    set_pod_terminated(jobs.core, jobs.ns, "cai-launcher", phase="Succeeded", exit_code=0)
    jobs.wait_phase(KIND, "cai", "Succeeded")
    wait_until(lambda: sorted(jobs.live_pods("cai")) == ["cai-launcher"], timeout=30, what="workers cleaned up")


def test_launcher_failure_fails_the_job_and_nothing_restarts(jobs, controller):
    jobs.create(_job())
    jobs.wait_phase(KIND, "cai", "Running")
    uid = jobs.pods("cai")["cai-worker-1"].metadata.uid
    set_pod_terminated(jobs.core, jobs.ns, "cai-launcher", phase="Failed", exit_code=2)
    jobs.wait_phase(KIND, "cai", "Failed")
    assert jobs.condition(KIND, "cai", "Failed")["reason"] == "Failed"
    # A worker failing once the launcher has decided changes nothing (a worker failing before
    # it has: tests/integration/test_fidelity.py).
    set_pod_terminated(jobs.core, jobs.ns, "cai-worker-1", phase="Failed", exit_code=1)
    wait_until(lambda: (jobs.condition(KIND, "cai", "ReplicaFailure") or {}).get("status") == "True", what="ReplicaFailure")
    assert jobs.condition(KIND, "cai", "Failed")["reason"] == "Failed"
    assert jobs.pods("cai")["cai-worker-1"].metadata.uid == uid  # never restarted
    assert len(jobs.pods("cai")) == 3  # cleanUpWorkers is off


def test_missing_worker_container_is_a_clear_failure(jobs, controller):
    job = _job()
    job["spec"]["worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    jobs.create(job)
    jobs.wait_phase(KIND, "cai", "Failed")
    assert "container named 'worker'" in jobs.condition(KIND, "cai", "Failed")["message"]
    assert jobs.pods("cai") == {}


def test_debug_and_pause(jobs, controller):
    jobs.create(_job(runMode={"debug": {"enabled": True}}))

    def debug(pods):
        assert pods["cai-launcher"].spec.containers[0].command == ["sleep", "inf"]
        assert pods["cai-worker-0"].spec.containers[0].command == ["sleep", "inf"]  # seed 003: every replica

    def resumed(pods):
        assert "colossalai run" in pods["cai-launcher"].spec.containers[0].command[2]

    debug_pause_resume(jobs, KIND, "cai", debug, resumed)
