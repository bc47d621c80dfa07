"""ColossalAIJob and MPIJob must not hang in Running (fidelity issue, item 1).

A worker failing for good while the launcher has not ended fails the job, naming the worker;
the launcher's wait for SSH is bounded and fails the launcher with a clear line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from airflow_t9k.controller.reconcile import Create
from tests.builders import colossal, cond, pod, run, service
from tests.kind_jobs import minimal

BASH = shutil.which("bash") or "bash"


def _mpi():
    job = minimal("MPIJob", "m")
    return job, "m-launcher", ["m-worker-0", "m-worker-1"]


def _colossal():
    return colossal(), "cai-launcher", ["cai-worker-0", "cai-worker-1"]


def _children(job, workers):
    return [service(w) for w in workers]


@pytest.mark.parametrize("make", [_colossal, _mpi], ids=["ColossalAIJob", "MPIJob"])
@pytest.mark.parametrize(
    ("launcher_phase", "worker_pod", "phase", "reason"),
    [
        ("Running", lambda w: pod(w, "Failed", 255), "Failed", "WorkerFailed"),
        ("Pending", lambda w: pod(w, "Failed", 137, reason="OOMKilled"), "Failed", "WorkerFailed"),
        # A node lost is a disruption, not a failure: the group restarts (test_disruptions.py).
        ("Running", lambda w: {**pod(w, "Failed"), "status": {"phase": "Failed", "reason": "NodeLost"}}, "Running", None),
        ("Running", lambda w: pod(w, "Failed", 1, deleting=True), "Running", None),
        ("Running", lambda w: pod(w), "Running", None),
        ("Succeeded", lambda w: pod(w, "Failed", 1), "Succeeded", "Succeeded"),
    ],
    ids=["worker-dies-while-launcher-waits", "worker-oom-launcher-pending", "worker-lost", "being-deleted-is-not-final",
         "healthy", "launcher-already-decided"],
)  # fmt: skip
def test_a_failed_worker_fails_the_job_until_the_launcher_has_ended(make, launcher_phase, worker_pod, phase, reason):
    job, launcher, workers = make()
    launcher_pod = pod(launcher, launcher_phase, 0 if launcher_phase == "Succeeded" else None, rtype="launcher")
    observed = [launcher_pod, worker_pod(workers[0]), pod(workers[1]), *_children(job, workers)]
    p = run(job, *observed, status={"phase": "Running"})
    assert p.status["phase"] == phase
    if reason:
        finished = cond(p, "Completed" if phase == "Succeeded" else "Failed")
        assert finished["reason"] == reason
    if reason == "WorkerFailed":
        assert cond(p, "Failed")["message"].startswith(f"Worker {workers[0]} failed (")


def test_debug_mode_keeps_a_failed_worker_for_inspection():
    job = colossal(runMode={"debug": {"enabled": True}})
    p = run(
        job,
        pod("cai-launcher", rtype="launcher"),
        pod("cai-worker-0", "Failed", 1),
        pod("cai-worker-1"),
        status={"phase": "Running"},
    )
    assert p.status["phase"] == "Running"


def _launcher_script(job, launcher) -> str:
    manifest = next(a.manifest for a in run(job).actions if isinstance(a, Create) and a.name == launcher)
    command = manifest["spec"]["containers"][0]["command"]
    assert command[:2] == ["bash", "-c"]
    return command[2]


@pytest.mark.parametrize("make", [_colossal, _mpi], ids=["ColossalAIJob", "MPIJob"])
def test_the_launchers_wait_for_ssh_is_bounded(tmp_path: Path, make):
    # Run the launcher's own script with an ssh that never answers: it must give up with a
    # clear line and a non-zero code instead of looping forever.
    job, launcher, _ = make()
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("w-0 slots=1\nw-1 slots=1\n")
    (tmp_path / "ssh").write_text("#!/bin/sh\nexit 255\n")
    (tmp_path / "ssh").chmod(0o755)
    (tmp_path / "sleep").write_text("#!/bin/sh\n")  # keep the test fast: the retry pause is not what is tested
    (tmp_path / "sleep").chmod(0o755)
    script = _launcher_script(job, launcher).replace("/etc/t9k/hostfile", str(hostfile))
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "T9K_SSH_WAIT_TIMEOUT": "1"}
    start = time.monotonic()
    done = subprocess.run([BASH, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 124
    assert "t9k: worker w-0 did not answer over SSH within 1s (T9K_SSH_WAIT_TIMEOUT); giving up" in done.stderr
    assert time.monotonic() - start < 10


def test_the_wait_ends_as_soon_as_every_worker_answers(tmp_path: Path):
    job, launcher, _ = _colossal()
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("w-0\nw-1\n")
    (tmp_path / "ssh").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "ssh").chmod(0o755)
    (tmp_path / "colossalai").write_text('#!/bin/sh\necho launched "$@"\n')
    (tmp_path / "colossalai").chmod(0o755)
    script = _launcher_script(job, launcher).replace("/etc/t9k/hostfile", str(hostfile))
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run([BASH, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("launched run --nproc_per_node 2")
