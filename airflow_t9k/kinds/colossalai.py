"""ColossalAIJob (seed 003): a launcher runs ``colossalai run`` over SSH on its workers.

The launcher pod is built from ``spec.launcher`` (image, workingDir, env, resources); the
training container of the workers must be named ``worker``. Seed 003: no pod restarts (a
restarted pod would not rejoin the run), and the launcher alone decides the job. Debug mode
gives every replica, workers included, ``sleep inf`` by default (seed 003); a worker that
should serve SSH in Debug names ``/usr/sbin/sshd`` in ``runMode.debug.replicaSpecs``.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import InvalidSpec, JobKind, ModeOverride, Obj
from airflow_t9k.kinds.ssh_launch import HOSTFILE, LAUNCHER, SSHLaunchKind, spec_of

if TYPE_CHECKING:
    from airflow_t9k.kinds.verdict import Ended

MASTER_PORT = 29500
_NUMBER = re.compile(r"^-\d")


def extra_launch_args(torch_args: list[str]) -> str:
    """``torchArgs`` as ``colossalai run --extra_launch_args`` wants them: ``k=v,flag,...``.

    Users write torchrun's own syntax, either ``--k=v`` or ``--k v`` as two values; a value
    is the next item when it does not start with ``-`` (or is a negative number).
    """
    out: list[str] = []
    i = 0
    while i < len(torch_args):
        arg = torch_args[i]
        if arg.startswith("-") and "=" not in arg and i + 1 < len(torch_args):
            following = torch_args[i + 1]
            if not following.startswith("-") or _NUMBER.match(following):
                arg, i = f"{arg}={following}", i + 1
        out.append(arg.lstrip("-"))
        i += 1
    for item in out:
        if "," in item:
            raise InvalidSpec(
                f"spec.worker.torchArgs: {item!r} contains a comma, which colossalai run's --extra_launch_args cannot carry"
            )
    return ",".join(out)


LAUNCHER_PLACEMENT = ("nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName", "schedulerName")


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
        # The seed gives the launcher no placement of its own: it goes where the workers may go
        # (their node selector, tolerations, affinity) and pulls as they do. Without this a
        # launcher for workers on tainted GPU nodes landed elsewhere, or nowhere.
        worker_spec = worker_template.get("spec") or {}
        placement = {k: copy.deepcopy(worker_spec[k]) for k in LAUNCHER_PLACEMENT if k in worker_spec}
        return {"spec": {**placement, "containers": [container]}}

    def validate(self, job: Obj) -> None:
        super().validate(job)
        worker = self.worker(job)
        proc = worker.get("procPerWorker", 1)
        if not isinstance(proc, int) or isinstance(proc, bool) or proc < 1:
            raise InvalidSpec(f"spec.worker.procPerWorker must be an integer >= 1, got {proc!r}")
        if not worker.get("command"):
            raise InvalidSpec("spec.worker.command is required (the training script and its arguments)")
        extra_launch_args([str(a) for a in worker.get("torchArgs") or []])

    def launch_command(self, job: Obj) -> list[str]:
        worker = self.worker(job)
        parts = ["colossalai", "run", "--nproc_per_node", str(worker.get("procPerWorker", 1)), "--hostfile", HOSTFILE,
                 "--master_addr", self.hosts(job)[0], "--master_port", str(MASTER_PORT)]  # fmt: skip
        torch_args = extra_launch_args([str(a) for a in worker.get("torchArgs") or []])
        if torch_args:
            parts += ["--extra_launch_args", torch_args]
        return parts + [str(c) for c in worker["command"]]

    def rule_verdict(self, job: Obj, phase: str, ended: list[Ended]) -> tuple[str, str] | None:
        # Seed 003's status example: the launcher's failure reads "The job exited with an error code."
        return ("Failed", "The job exited with an error code.") if phase == "Failed" else None

    def queued(self, job: Obj, rtype: str) -> bool:
        # Seed 003 puts the "execution replicas" (the workers) in the queue, not the launcher:
        # it is not charged to the queue. It is still created only once the workers are
        # admitted, since it would otherwise spend its SSH wait on workers still queued.
        return rtype != LAUNCHER

    def debug_default(self, rtype: str) -> ModeOverride:
        # Seed 003: `sleep inf` for every replica, not sshd on the workers (MPIJob keeps sshd,
        # as its manual says). The launcher sleeps too, so nothing needs the workers' sshd.
        return JobKind.debug_default(self, rtype)
