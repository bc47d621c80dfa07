"""MPIJob against the real API server: the manual's example, launcher-decided outcome, modes, bad input."""

from __future__ import annotations

import pytest

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated
from tests.support.modes import debug_pause_resume

KIND = "MPIJob"


def example(**spec):
    """The T9k manual's MPIJob (job-kinds.md 1.4), with a GPU so slots show."""
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": KIND, "metadata": {"name": "mpi"},
        "spec": {
            "worker": {"replicas": 5, "extraMPIArgs": ["-N", "3", "--enable-recovery", "--max-restarts", "100",
                                                       "--allow-run-as-root", "-bind-to", "none"],
                       "cmd": ["./random_walk", "20", "40", "2"],
                       "template": {"spec": {"containers": [{"name": "mpi-worker", "image": "t9kpublic/mpi-tutorial:2021022-2",
                                                             "resources": {"limits": {"cpu": "100m", "nvidia.com/gpu": "1"}}}]}}},
            "mca": {"btl": "^openib"}, "ssh": {"sshAuthMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
                 "mpiHome": "/usr/local",
            **spec,
        },
    }  # fmt: skip


def test_example_produces_launcher_workers_hostfile_and_mpirun(jobs, controller):
    jobs.create(example())
    jobs.wait_phase(KIND, "mpi", "Running")
    pods = jobs.pods("mpi")
    assert sorted(pods) == ["mpi-launcher"] + [f"mpi-worker-{i}" for i in range(5)]
    script = pods["mpi-launcher"].spec.containers[0].command[2]
    assert script.endswith("exec /usr/local/bin/mpirun --hostfile /etc/t9k/hostfile --mca btl '^openib' -N 3 --enable-recovery "
                           "--max-restarts 100 --allow-run-as-root -bind-to none ./random_walk 20 40 2")  # fmt: skip
    assert pods["mpi-worker-3"].spec.containers[0].command == [
        "/usr/sbin/sshd",
        "-D",
        "-e",
        "-h",
        "/root/.ssh/ssh_host_ed25519_key",
        "-o",
        "StrictModes=no",
    ]
    hostfile = jobs.core.read_namespaced_config_map("mpi-hostfile", jobs.ns).data["hostfile"]
    assert hostfile.splitlines() == [f"mpi-worker-{i} slots=1" for i in range(5)]
    assert set(jobs.core.read_namespaced_secret("mpi-ssh", jobs.ns).data) >= {"authorized_keys", "id_ed25519"}


@pytest.mark.parametrize(("phase", "code"), [("Succeeded", 0), ("Failed", 1)])
def test_launcher_decides_and_workers_are_cleaned_up(jobs, controller, phase, code):
    jobs.create(example(runPolicy={"cleanUpWorkers": True}))
    jobs.wait_phase(KIND, "mpi", "Running")
    set_pod_terminated(jobs.core, jobs.ns, "mpi-launcher", phase=phase, exit_code=code)
    jobs.wait_phase(KIND, "mpi", phase)
    wait_until(lambda: sorted(jobs.live_pods("mpi")) == ["mpi-launcher"], what="workers cleaned up")


def test_debug_then_pause_then_resume(jobs, controller):
    jobs.create(example(runMode={"debug": {"enabled": True}}))

    def debug(pods):
        assert pods["mpi-launcher"].spec.containers[0].command == ["sleep", "inf"]
        assert pods["mpi-worker-0"].spec.containers[0].command == [
            "/usr/sbin/sshd",
            "-D",
            "-e",
            "-h",
            "/root/.ssh/ssh_host_ed25519_key",
            "-o",
            "StrictModes=no",
        ]

    def resumed(pods):
        assert "mpirun" in pods["mpi-launcher"].spec.containers[0].command[2]

    debug_pause_resume(jobs, KIND, "mpi", debug, resumed)


@pytest.mark.parametrize(
    ("change", "needle"),
    [({"ssh": {"sshdPath": "usr/sbin/sshd"}}, "sshdPath"), ({"mca": {"btl": 1}}, "mca"),
     ({"worker": {"replicas": 0, "cmd": ["x"], "template": {"spec": {"containers": [{"name": "mpi-worker"}]}}}}, "replicas")],
    ids=["relative-sshd", "mca-not-string", "zero-workers"],
)  # fmt: skip
def test_rejected_at_admission(jobs, change, needle):
    assert needle in jobs.rejected(example(**change))


def test_missing_worker_container_fails_clearly(jobs, controller):
    body = example()
    body["spec"]["worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    jobs.create(body)
    jobs.wait_phase(KIND, "mpi", "Failed")
    assert "named 'mpi-worker'" in jobs.condition(KIND, "mpi", "Failed")["message"]


def test_the_launcher_asks_for_modest_resources_not_the_workers_gpus(jobs, controller):
    job = example()
    job["metadata"]["name"] = "mpires"
    job["spec"]["worker"]["replicas"] = 1
    jobs.create(job)
    # The pods are created together; the listing may catch the launcher before the worker.
    wait_until(lambda: {"mpires-launcher", "mpires-worker-0"} <= set(jobs.pods("mpires")), timeout=30, what="launcher and worker")
    launcher = jobs.pods("mpires")["mpires-launcher"].spec.containers[0].resources
    assert launcher.limits == {"cpu": "1", "memory": "1Gi"}
    assert launcher.requests == {"cpu": "100m", "memory": "128Mi"}
    assert jobs.pods("mpires")["mpires-worker-0"].spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
