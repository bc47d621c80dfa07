"""MPIJob (T9k's shape): ``mpirun`` from a launcher over sshd workers.

There is no launcher in the spec: the launcher pod is the worker template (same image) with
its ``mpi-worker`` container's resources replaced by LAUNCHER_RESOURCES (or
``spec.launcher.resources``, our extension) and its command replaced by
``<mpiHome>/bin/mpirun --hostfile ... --mca k v ... <extraMPIArgs> <worker.cmd>``, run once every
worker answers over SSH. The hostfile gives each worker
``slots=<GPUs of the worker container>`` (1 without GPUs). The workers' container must be
named ``mpi-worker``; its own command is replaced by sshd.
"""

from __future__ import annotations

import copy

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import InvalidSpec, Obj, ReplicaSpec, container_named, set_env
from airflow_t9k.kinds.ssh_launch import HOSTFILE, LAUNCHER, SSHLaunchKind, spec_of

GPU = "nvidia.com/gpu"
# Open MPI refuses to start as root unless both are set (or --allow-run-as-root is given), and
# the launcher, like most training images, runs as root. A user's own value wins.
RUN_AS_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# mpirun only starts the ranks over SSH: like Kubeflow's MPI operator's launcher it needs no
# GPUs and little CPU or memory. Copying the workers' resources held 8 idle GPUs per job.
LAUNCHER_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


class MPIJob(SSHLaunchKind):
    resource = RESOURCES["MPIJob"]
    training_container = "mpi-worker"
    worker_container = "mpi-worker"
    auth_mount_key = "sshAuthMountPath"

    def launcher_template(self, job: Obj, worker_template: Obj) -> Obj:
        spec = copy.deepcopy(worker_template.get("spec") or {})
        main = container_named(spec, self.worker_container)
        if main is not None:
            own = (spec_of(job).get("launcher") or {}).get("resources")
            main["resources"] = copy.deepcopy(own if isinstance(own, dict) else LAUNCHER_RESOURCES)
        return {"spec": spec}

    def validate(self, job: Obj) -> None:
        super().validate(job)
        if not self.worker(job).get("cmd"):
            raise InvalidSpec("spec.worker.cmd is required (what mpirun runs)")
        mca = spec_of(job).get("mca") or {}
        if not isinstance(mca, dict) or not all(isinstance(v, str) for v in mca.values()):
            raise InvalidSpec("spec.mca must map MCA parameter names to string values")

    def slots(self, job: Obj) -> int:
        main = container_named(self.worker(job)["template"].get("spec") or {}, self.worker_container) or {}
        gpus = ((main.get("resources") or {}).get("limits") or {}).get(GPU)
        try:
            return max(int(gpus), 1) if gpus is not None else 1
        except (TypeError, ValueError):
            return 1

    def hostfile_line(self, job: Obj, host: str) -> str:
        return f"{host} slots={self.slots(job)}"

    def launch_command(self, job: Obj) -> list[str]:
        spec = spec_of(job)
        worker = self.worker(job)
        home = str(spec.get("mpiHome") or "/usr/local").rstrip("/")
        parts = [f"{home}/bin/mpirun", "--hostfile", HOSTFILE]
        for key, value in sorted((spec.get("mca") or {}).items()):
            parts += ["--mca", key, value]
        return parts + [str(a) for a in worker.get("extraMPIArgs") or []] + [str(c) for c in worker["cmd"]]

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        super().customize_pod(job, spec, rank, pod)
        main = self.main_container(pod["spec"])
        if spec.type == LAUNCHER and main is not None:
            given = {e.get("name") for e in main.get("env") or []}
            set_env(main, {k: v for k, v in RUN_AS_ROOT_ENV.items() if k not in given})
