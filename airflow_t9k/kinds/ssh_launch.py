"""Kinds whose launcher starts the run over SSH on its workers (ColossalAIJob, MPIJob).

Shared mechanics: a launcher pod ``<job>-launcher`` and worker pods ``<job>-worker-<i>``; a
Secret ``<job>-ssh`` with a generated key pair mounted on every pod; workers run sshd and
have a headless Service each; a ConfigMap ``<job>-hostfile`` mounted on the launcher at
``/etc/t9k``; the launcher waits until every worker answers over SSH (at most
``T9K_SSH_WAIT_TIMEOUT`` seconds, default 1800), then runs the kind's launch command. Pods
are not restarted and the launcher decides the job, except that a worker failing while the
launcher has not ended fails the job at once (workers only run sshd: the launch cannot
succeed without one). ``runPolicy.cleanUpWorkers`` removes the workers when it ends.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import ClassVar

from airflow_t9k.kinds.base import (
    Children,
    InvalidSpec,
    JobKind,
    ModeOverride,
    Obj,
    ReplicaSpec,
    RestartPolicy,
    Rule,
    container_named,
    set_env,
)

LAUNCHER = "launcher"
WORKER = "worker"
HOSTFILE_DIR = "/etc/t9k"
HOSTFILE = f"{HOSTFILE_DIR}/hostfile"
SSH_PORT = 22
NEVER = RestartPolicy("Never", 0)
SSH_WAIT_ENV = "T9K_SSH_WAIT_TIMEOUT"
SSH_WAIT_DEFAULT = 1800  # seconds: long enough for workers to pull a large image
SSH_WAIT_EXIT = 124  # timeout(1)'s code


def wait_for_ssh(hostfile: str) -> str:
    """Shell that waits until every host of ``hostfile`` answers over SSH, within a bound.

    ``$T9K_SSH_WAIT_TIMEOUT`` (seconds since the script started; 0: no bound) comes from the
    container's env, so a user sets it like any other variable.
    """
    return (
        f'limit="${{{SSH_WAIT_ENV}:-{SSH_WAIT_DEFAULT}}}"; '
        f"for h in $(cut -d' ' -f1 {hostfile}); do "
        'until ssh -o BatchMode=yes -o ConnectTimeout=3 "$h" true 2>/dev/null; do '
        'if [ "$limit" -gt 0 ] && [ "$SECONDS" -ge "$limit" ]; then '
        f'echo "t9k: worker $h did not answer over SSH within ${{limit}}s ({SSH_WAIT_ENV}); giving up" >&2; '
        f"exit {SSH_WAIT_EXIT}; fi; "
        'echo "waiting for $h"; sleep 2; done; done'
    )


# What each pod mounts of the job's SSH Secret (controller/ssh.py): the private user key only
# where a launch starts, the host key only where sshd serves it.
LAUNCHER_FILES = ("id_ed25519", "config", "known_hosts")
SSHD_FILES = ("authorized_keys", "ssh_host_ed25519_key")


def ssh_volume(secret: str, files: tuple[str, ...]) -> Obj:
    """The SSH Secret as a volume holding only ``files``, readable by its owner only."""
    items = [{"key": f, "path": f} for f in files]
    return {"name": "t9k-ssh", "secret": {"secretName": secret, "defaultMode": 0o600, "items": items}}


def sshd_command(sshd: str, ssh_dir: str) -> list[str]:
    """sshd in the foreground, serving the job's host key (the one known_hosts trusts).

    ``StrictModes=no``: the kubelet projects the key Secret into a world-writable tmpfs
    directory (read-only inside the container, replaced atomically), and sshd's strict modes
    refuse every key there ("bad ownership or modes for directory /root/.ssh", seen on the
    real node). Kubeflow's MPI images turn it off in sshd_config; passing it here keeps users'
    images unchanged.
    """
    return [sshd, "-D", "-e", "-h", f"{ssh_dir}/ssh_host_ed25519_key", "-o", "StrictModes=no"]


def pod_failure(pod: Obj) -> str:
    """'exit code 137 (OOMKilled)' or the pod's own reason, for messages."""
    status = pod.get("status") or {}
    if status.get("reason"):
        return str(status["reason"])
    for cs in status.get("containerStatuses") or []:
        ended = (cs.get("state") or {}).get("terminated")
        if ended and ended.get("exitCode", 0) != 0:
            return f"container {cs.get('name')} exit code {ended.get('exitCode')}" + (
                f" ({ended['reason']})" if ended.get("reason") else ""
            )
    return "failed"


def failed_worker(pods: Mapping[str, Obj], launcher: str, workers: list[str]) -> tuple[str, str, str] | None:
    """A failed worker fails the job while the launcher has not ended (the launcher decides after).

    Without this a worker that died before the launch (sshd missing, OOM at start, a bad node)
    left the launcher waiting and the job Running forever.
    """
    ended = (pods.get(launcher) or {}).get("status", {}).get("phase") in ("Succeeded", "Failed")
    if ended:
        return None
    for name in workers:
        pod = pods.get(name)
        if pod and not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") == "Failed":
            return ("Failed", "WorkerFailed",
                    (f"Worker {name} failed ({pod_failure(pod)}) before the launcher finished; "
                     "the job cannot run without it."))  # fmt: skip
    return None


def spec_of(job: Obj) -> Obj:
    return job.get("spec") or {}


class SSHLaunchKind(JobKind):
    worker_container: ClassVar[str]
    auth_mount_key: ClassVar[str]  # the field of spec.ssh holding the key mount path
    restarts_as_group: ClassVar[bool] = True

    # -- what a kind supplies -----------------------------------------------------------------
    def launcher_template(self, job: Obj, worker_template: Obj) -> Obj:
        raise NotImplementedError

    def launch_command(self, job: Obj) -> list[str]:
        raise NotImplementedError

    def hostfile_line(self, job: Obj, host: str) -> str:
        return host

    # -- shared ---------------------------------------------------------------------------------
    def ssh(self, job: Obj) -> Obj:
        ssh = dict(spec_of(job).get("ssh") or {})
        ssh.setdefault(self.auth_mount_key, "/root/.ssh")
        ssh.setdefault("sshdPath", "/usr/sbin/sshd")
        return ssh

    def worker(self, job: Obj) -> Obj:
        worker = spec_of(job).get("worker")
        if not isinstance(worker, dict) or not isinstance(worker.get("template"), dict):
            raise InvalidSpec("spec.worker.template is required")
        return worker

    def pod_name(self, job: Obj, rtype: str, rank: int) -> str:
        name = job["metadata"]["name"]
        return f"{name}-{LAUNCHER}" if rtype == LAUNCHER else f"{name}-{rtype}-{rank}"

    def replica_specs(self, job: Obj) -> list[ReplicaSpec]:
        worker = self.worker(job)
        replicas = worker.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise InvalidSpec(f"spec.worker.replicas must be an integer >= 1, got {replicas!r}")
        launcher = self.launcher_template(job, worker["template"])
        # The spec gives the launcher no template of its own: it shares the workers' labels
        # and annotations (mesh or monitoring annotations usually belong on both).
        meta = worker["template"].get("metadata") or {}
        launcher["metadata"] = {k: v for k, v in meta.items() if k in ("labels", "annotations")}
        return [ReplicaSpec(LAUNCHER, 1, launcher, NEVER), ReplicaSpec(WORKER, replicas, worker["template"], NEVER)]

    def validate(self, job: Obj) -> None:
        super().validate(job)
        if container_named(self.worker(job)["template"].get("spec") or {}, self.worker_container) is None:
            raise InvalidSpec(f"spec.worker.template must contain a container named {self.worker_container!r}")
        if not str(self.ssh(job)["sshdPath"]).startswith("/"):
            raise InvalidSpec("spec.ssh.sshdPath must be an absolute path")

    def main_container(self, pod_spec: Obj) -> Obj | None:
        return container_named(pod_spec, self.worker_container) or container_named(pod_spec, None)

    def success_rules(self, job: Obj) -> list[Rule]:
        return [{LAUNCHER: [0]}]

    def failure_rules(self, job: Obj) -> list[Rule]:
        return [{LAUNCHER: [0]}]

    def service_ports(self, job: Obj) -> list[Obj]:
        return [{"name": "ssh", "port": SSH_PORT}]

    def wants_services(self, job: Obj, rtype: str) -> bool:
        return rtype == WORKER

    def ssh_secret_name(self, job: Obj) -> str:
        return f"{job['metadata']['name']}-ssh"

    def hostfile_name(self, job: Obj) -> str:
        return f"{job['metadata']['name']}-hostfile"

    def hosts(self, job: Obj) -> list[str]:
        return [self.service_name(job, WORKER, i) for i in range(self.worker(job).get("replicas", 1))]

    def extra_children(self, job: Obj, observed: Children) -> list[Obj]:
        lines = "".join(f"{self.hostfile_line(job, h)}\n" for h in self.hosts(job))
        return [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": self.hostfile_name(job)}, "data": {"hostfile": lines}}
        ]

    def launcher_script(self, job: Obj) -> str:
        return f"set -e; {wait_for_ssh(HOSTFILE)}; exec {shlex.join(self.launch_command(job))}"

    def verdict(self, job: Obj, observed: Children) -> tuple[str, str, str] | None:
        workers = [self.pod_name(job, WORKER, i) for i in range(self.worker(job).get("replicas", 1))]
        return failed_worker(observed.pods, self.pod_name(job, LAUNCHER, 0), workers)

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        ssh = self.ssh(job)
        pod_spec = pod["spec"]
        volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in ("t9k-ssh", "t9k-hostfile")]
        volumes.append(ssh_volume(self.ssh_secret_name(job), LAUNCHER_FILES if spec.type == LAUNCHER else SSHD_FILES))
        mounts = [{"name": "t9k-ssh", "mountPath": ssh[self.auth_mount_key]}]
        main = self.main_container(pod_spec)
        if main is None:
            raise RuntimeError(f"{spec.type} has no main container; validate() should have refused the job")
        if spec.type == LAUNCHER:
            volumes.append({"name": "t9k-hostfile", "configMap": {"name": self.hostfile_name(job)}})
            mounts.append({"name": "t9k-hostfile", "mountPath": HOSTFILE_DIR, "readOnly": True})
            main["command"] = ["bash", "-c", self.launcher_script(job)]
        else:
            main["command"] = sshd_command(ssh["sshdPath"], ssh[self.auth_mount_key])
            ports = main.setdefault("ports", [])
            if not any(p.get("containerPort") == SSH_PORT for p in ports):
                ports.append({"name": "ssh", "containerPort": SSH_PORT})
        main.pop("args", None)
        set_env(main, {"T9K_JOB_NAME": job["metadata"]["name"], "T9K_REPLICA_TYPE": spec.type, "T9K_REPLICA_RANK": str(rank)})
        main["volumeMounts"] = [m for m in main.get("volumeMounts") or [] if m.get("name") not in ("t9k-ssh", "t9k-hostfile")]
        main["volumeMounts"] += mounts
        pod_spec["volumes"] = volumes

    def debug_default(self, rtype: str) -> ModeOverride:
        return super().debug_default(rtype) if rtype == LAUNCHER else ModeOverride()

    def cleanup_types(self, job: Obj) -> tuple[str, set[str]] | None:
        clean = bool((spec_of(job).get("runPolicy") or {}).get("cleanUpWorkers"))
        return ("All", {WORKER}) if clean else ("None", set())
