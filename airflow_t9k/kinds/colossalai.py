"""ColossalAIJob (seed 003): a launcher runs ``colossalai run`` over SSH on its workers.

The launcher pod is built from ``spec.launcher`` (image, workingDir, env, resources); the
training container of the workers must be named ``worker``. Seed 003: no pod restarts (a
restarted pod would not rejoin the run), and the launcher alone decides the job.
"""

from __future__ import annotations

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import InvalidSpec, Obj
from airflow_t9k.kinds.ssh_launch import HOSTFILE, SSHLaunchKind, spec_of

MASTER_PORT = 29500


class ColossalAIJob(SSHLaunchKind):
    resource = RESOURCES["ColossalAIJob"]
    training_container = "worker"
    worker_container = "worker"
    auth_mount_key = "authMountPath"

    def launcher_template(self, job: Obj, worker_template: Obj) -> Obj:
        launcher = spec_of(job).get("launcher")
        if not isinstance(launcher, dict) or not launcher.get("image"):
            raise InvalidSpec("spec.launcher.image is required")
        container = {"name": "launcher", "image": launcher["image"]}
        for key in ("workingDir", "env", "resources"):
            if launcher.get(key):
                container[key] = launcher[key]
        return {"spec": {"containers": [container]}}

    def validate(self, job: Obj) -> None:
        super().validate(job)
        worker = self.worker(job)
        proc = worker.get("procPerWorker", 1)
        if not isinstance(proc, int) or isinstance(proc, bool) or proc < 1:
            raise InvalidSpec(f"spec.worker.procPerWorker must be an integer >= 1, got {proc!r}")
        if not worker.get("command"):
            raise InvalidSpec("spec.worker.command is required (the training script and its arguments)")

    def launch_command(self, job: Obj) -> list[str]:
        worker = self.worker(job)
        parts = ["colossalai", "run", "--nproc_per_node", str(worker.get("procPerWorker", 1)), "--hostfile", HOSTFILE,
                 "--master_addr", self.hosts(job)[0], "--master_port", str(MASTER_PORT)]  # fmt: skip
        torch_args = [str(a).lstrip("-") for a in worker.get("torchArgs") or []]
        if torch_args:
            parts += ["--extra_launch_args", ",".join(torch_args)]
        return parts + [str(c) for c in worker["command"]]
