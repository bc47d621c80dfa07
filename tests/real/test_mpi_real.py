"""MPIJob on the real node: the launcher waits for the workers' sshd, then mpirun starts an
mpi4py allreduce on them over SSH with the generated key and hostfile."""

from __future__ import annotations

import json

from tests.real.support import on_real_node, py


def mpijob(name: str, workers: int = 2, **spec) -> dict:
    container = {"name": "mpi-worker", "resources": {"limits": {"cpu": "400m", "memory": "512Mi"}}}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "MPIJob", "metadata": {"name": name},
        "spec": {"worker": {"replicas": workers, "cmd": py("mpi_allreduce.py"), "extraMPIArgs": ["-N", "1"],
                            "template": on_real_node({"spec": {"containers": [container]}})},
                 "mca": {"btl": "tcp,self", "oob": "tcp"}, "mpiHome": "/usr", **spec},
    }  # fmt: skip


def test_mpirun_over_ssh_runs_an_allreduce_on_every_worker(jobs, controller, real):
    jobs.create(mpijob("mpi"))
    pods = ["mpi-launcher", "mpi-worker-0", "mpi-worker-1"]
    done = real.finished(jobs, "MPIJob", "mpi", pods, timeout=180)
    assert done["status"]["phase"] == "Succeeded", real.describe(*pods)
    log = real.log("mpi-launcher")
    # mpirun's output comes back to the launcher: both ranks, each on its own worker pod.
    assert "rank 0/2" in log, log
    assert "rank 1/2" in log, log
    assert log.count("allreduce=3") == 2, log
    hosts = json.loads(next(ln for ln in log.splitlines() if ln.startswith("hosts "))[6:])
    assert hosts == ["mpi-worker-0", "mpi-worker-1"], log
