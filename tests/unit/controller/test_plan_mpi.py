"""plan() for MPIJob: launcher from the worker template, sshd workers, hostfile slots, mpirun."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile import Create, CreateSSHSecret
from tests.builders import cond, pod, run, service


def mpi(workers=3, gpus=None, **spec):
    container = {"name": "mpi-worker", "image": "mpi:1", "command": ["ignored"]}
    if gpus is not None:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "MPIJob",
        "metadata": {"name": "m", "namespace": "ns", "uid": "uid-m", "generation": 1},
        "spec": {"worker": {"replicas": workers, "extraMPIArgs": ["-N", "3", "--allow-run-as-root"],
                            "cmd": ["./random_walk", "20"], "template": {"spec": {"containers": [container]}}},
                 "mca": {"btl": "^openib", "pml": "ob1"}, "ssh": {"sshAuthMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
                 "mpiHome": "/opt/openmpi", **spec},
    }  # fmt: skip


def manifests(p, kind):
    return {a.name: a.manifest for a in p.actions if isinstance(a, Create) and a.kind == kind}


def test_children_launcher_workers_services_secret_hostfile():
    p = run(mpi(gpus=2))
    assert p.creates("Pod") == ["m-launcher", "m-worker-0", "m-worker-1", "m-worker-2"]
    assert p.creates("Service") == ["m-worker-0", "m-worker-1", "m-worker-2"]
    assert [a.name for a in p.actions if isinstance(a, CreateSSHSecret)] == ["m-ssh"]
    assert (
        manifests(p, "ConfigMap")["m-hostfile"]["data"]["hostfile"]
        == "m-worker-0 slots=2\nm-worker-1 slots=2\nm-worker-2 slots=2\n"
    )


def test_launcher_runs_mpirun_after_waiting_for_workers():
    launcher = manifests(run(mpi()), "Pod")["m-launcher"]["spec"]["containers"][0]
    assert launcher["image"] == "mpi:1"
    assert launcher["command"][:2] == ["bash", "-c"]
    assert launcher["command"][2].endswith(
        "exec /opt/openmpi/bin/mpirun --hostfile /etc/t9k/hostfile --mca btl '^openib' --mca pml ob1 -N 3 --allow-run-as-root "
        "./random_walk 20"
    )
    assert "ssh -o BatchMode=yes" in launcher["command"][2]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ([], {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}),
        (
            [{"name": "OMPI_ALLOW_RUN_AS_ROOT", "value": "0"}],
            {"OMPI_ALLOW_RUN_AS_ROOT": "0", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"},
        ),
    ],
)
def test_launcher_may_run_mpirun_as_root_unless_the_user_says_otherwise(given, expected):
    job = mpi()
    job["spec"]["worker"]["template"]["spec"]["containers"][0]["env"] = given
    pods = manifests(run(job), "Pod")
    env = {e["name"]: e.get("value") for e in pods["m-launcher"]["spec"]["containers"][0]["env"]}
    assert {k: env.get(k) for k in expected} == expected
    worker_env = {e["name"] for e in pods["m-worker-0"]["spec"]["containers"][0]["env"]}
    assert not worker_env & {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"}  # only mpirun needs it


def test_workers_run_sshd_and_slots_default_to_one():
    p = run(mpi())
    worker = manifests(p, "Pod")["m-worker-1"]["spec"]["containers"][0]
    assert worker["command"] == ["/usr/sbin/sshd", "-D", "-e", "-h", "/root/.ssh/ssh_host_ed25519_key", "-o", "StrictModes=no"]
    assert "slots=1" in manifests(p, "ConfigMap")["m-hostfile"]["data"]["hostfile"]


@pytest.mark.parametrize(("launcher_phase", "phase"), [("Succeeded", "Succeeded"), ("Failed", "Failed")])
def test_launcher_decides_and_clean_up_workers(launcher_phase, phase):
    objs = [pod("m-launcher", launcher_phase, 0 if launcher_phase == "Succeeded" else 1, rtype="launcher"),
            *(pod(f"m-worker-{i}") for i in range(3)), *(service(f"m-worker-{i}") for i in range(3))]  # fmt: skip
    p = run(mpi(runPolicy={"cleanUpWorkers": True}), *objs, status={"phase": "Running"})
    assert p.status["phase"] == phase
    assert p.deletes("Pod") == ["m-worker-0", "m-worker-1", "m-worker-2"]


def test_debug_defaults_launcher_sleeps_workers_keep_sshd():
    ps = manifests(run(mpi(runMode={"debug": {"enabled": True}})), "Pod")
    assert ps["m-launcher"]["spec"]["containers"][0]["command"] == ["sleep", "inf"]
    assert ps["m-worker-0"]["spec"]["containers"][0]["command"] == [
        "/usr/sbin/sshd",
        "-D",
        "-e",
        "-h",
        "/root/.ssh/ssh_host_ed25519_key",
        "-o",
        "StrictModes=no",
    ]


@pytest.mark.parametrize(
    ("change", "needle"),
    [({"worker": {"replicas": 1, "cmd": ["x"], "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}},
      "named 'mpi-worker'"),
     ({"worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "mpi-worker", "image": "i"}]}}}},
      "spec.worker.cmd is required"),
     ({"ssh": {"sshdPath": "sshd"}}, "absolute path"),
     ({"mca": {"btl": 1}}, "spec.mca")],
    ids=["container", "cmd", "sshd", "mca"],
)  # fmt: skip
def test_bad_input(change, needle):
    p = run(mpi(**change))
    assert p.status["phase"] == "Failed"
    assert needle in cond(p, "Failed")["message"]


@pytest.mark.parametrize(
    ("spec", "launcher_resources"),
    [({}, {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
     ({"launcher": {"resources": {"limits": {"cpu": "4", "memory": "8Gi"}}}}, {"limits": {"cpu": "4", "memory": "8Gi"}})],
    ids=["default", "spec-override"],
)  # fmt: skip
def test_launcher_has_its_own_modest_resources_not_the_workers_gpus(spec, launcher_resources):
    ps = manifests(run(mpi(gpus=8, **spec)), "Pod")
    assert ps["m-launcher"]["spec"]["containers"][0]["resources"] == launcher_resources
    assert ps["m-worker-0"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
