"""ColossalAIJob (seed 003): a launcher that runs ``colossalai run`` over SSH on workers.

Workers run sshd with a generated key pair mounted at ``ssh.authMountPath``; the launcher
waits until every worker answers over SSH, then launches training from
``launcher.workingDir``. Pods are never restarted (seed 003: a restarted pod would not
rejoin the run), and the launcher alone decides success and failure.
"""

from __future__ import annotations

import shlex

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import (
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
MASTER_PORT = 29500


def _spec(job: Obj) -> Obj:
    return job.get("spec") or {}


def _ssh(job: Obj) -> Obj:
    ssh = dict(_spec(job).get("ssh") or {})
    ssh.setdefault("authMountPath", "/root/.ssh")
    ssh.setdefault("sshdPath", "/usr/sbin/sshd")
    return ssh


class ColossalAIJob(JobKind):
    resource = RESOURCES["ColossalAIJob"]
    training_container = WORKER

    def pod_name(self, job: Obj, rtype: str, rank: int) -> str:
        name = job["metadata"]["name"]
        return f"{name}-{LAUNCHER}" if rtype == LAUNCHER else f"{name}-{rtype}-{rank}"

    def replica_specs(self, job: Obj) -> list[ReplicaSpec]:
        spec = _spec(job)
        launcher = spec.get("launcher")
        worker = spec.get("worker")
        if not isinstance(launcher, dict) or not launcher.get("image"):
            raise InvalidSpec("spec.launcher.image is required")
        if not isinstance(worker, dict) or not isinstance(worker.get("template"), dict):
            raise InvalidSpec("spec.worker.template is required")
        replicas = worker.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise InvalidSpec(f"spec.worker.replicas must be an integer >= 1, got {replicas!r}")
        container = {"name": LAUNCHER, "image": launcher["image"]}
        for key in ("workingDir", "env", "resources"):
            if launcher.get(key):
                container[key] = launcher[key]
        never = RestartPolicy("Never", 0)
        # The launcher has no template of its own; it shares the workers' labels and
        # annotations (mesh or monitoring annotations usually belong on both).
        meta = worker["template"].get("metadata") or {}
        launcher_template = {"metadata": {k: v for k, v in meta.items() if k in ("labels", "annotations")},
                             "spec": {"containers": [container]}}  # fmt: skip
        return [
            ReplicaSpec(LAUNCHER, 1, launcher_template, never),
            ReplicaSpec(WORKER, replicas, worker["template"], never),
        ]

    def validate(self, job: Obj) -> None:
        super().validate(job)
        worker = _spec(job)["worker"]
        if container_named(worker["template"].get("spec") or {}, WORKER) is None:
            raise InvalidSpec("spec.worker.template must contain a container named 'worker' (the training container)")
        proc = worker.get("procPerWorker", 1)
        if not isinstance(proc, int) or isinstance(proc, bool) or proc < 1:
            raise InvalidSpec(f"spec.worker.procPerWorker must be an integer >= 1, got {proc!r}")
        if not worker.get("command"):
            raise InvalidSpec("spec.worker.command is required (the training script and its arguments)")
        if not str(_ssh(job)["sshdPath"]).startswith("/"):
            raise InvalidSpec("spec.ssh.sshdPath must be an absolute path")

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
        n = _spec(job)["worker"].get("replicas", 1)
        return [self.service_name(job, WORKER, i) for i in range(n)]

    def extra_children(self, job: Obj) -> list[Obj]:
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": self.hostfile_name(job)},
                "data": {"hostfile": "".join(f"{h}\n" for h in self.hosts(job))},
            }
        ]

    def launch_command(self, job: Obj) -> str:
        worker = _spec(job)["worker"]
        parts = [
            "colossalai", "run",
            "--nproc_per_node", str(worker.get("procPerWorker", 1)),
            "--hostfile", HOSTFILE,
            "--master_addr", self.hosts(job)[0],
            "--master_port", str(MASTER_PORT),
        ]  # fmt: skip
        torch_args = [str(a).lstrip("-") for a in worker.get("torchArgs") or []]
        if torch_args:
            parts += ["--extra_launch_args", ",".join(torch_args)]
        parts += [str(c) for c in worker["command"]]
        wait = (
            f'for h in $(cat {HOSTFILE}); do '
            'until ssh -o BatchMode=yes -o ConnectTimeout=3 "$h" true 2>/dev/null; do '
            'echo "waiting for $h"; sleep 2; done; done'
        )
        return f"set -e; {wait}; exec {shlex.join(parts)}"

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        ssh = _ssh(job)
        pod_spec = pod["spec"]
        volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in ("t9k-ssh", "t9k-hostfile")]
        volumes.append({"name": "t9k-ssh", "secret": {"secretName": self.ssh_secret_name(job), "defaultMode": 0o600}})
        mounts = [{"name": "t9k-ssh", "mountPath": ssh["authMountPath"]}]
        if spec.type == LAUNCHER:
            volumes.append({"name": "t9k-hostfile", "configMap": {"name": self.hostfile_name(job)}})
            mounts.append({"name": "t9k-hostfile", "mountPath": HOSTFILE_DIR, "readOnly": True})
            main = pod_spec["containers"][0]
            main["command"] = ["bash", "-c", self.launch_command(job)]
            main.pop("args", None)
        else:
            main = container_named(pod_spec, WORKER)
            assert main is not None  # validate() guarantees it
            main["command"] = [ssh["sshdPath"], "-D", "-e"]
            main.pop("args", None)
            main.setdefault("ports", [])
            if not any(p.get("containerPort") == SSH_PORT for p in main["ports"]):
                main["ports"].append({"name": "ssh", "containerPort": SSH_PORT})
        set_env(main, {"T9K_JOB_NAME": job["metadata"]["name"], "T9K_REPLICA_TYPE": spec.type, "T9K_REPLICA_RANK": str(rank)})
        main["volumeMounts"] = [m for m in main.get("volumeMounts") or [] if m.get("name") not in ("t9k-ssh", "t9k-hostfile")]
        main["volumeMounts"] += mounts
        pod_spec["volumes"] = volumes

    def debug_default(self, rtype: str) -> ModeOverride:
        # Workers keep sshd so a person debugging on the launcher can still reach them.
        return super().debug_default(rtype) if rtype == LAUNCHER else ModeOverride()

    def cleanup_types(self, job: Obj) -> tuple[str, set[str]] | None:
        clean = bool((_spec(job).get("runPolicy") or {}).get("cleanUpWorkers"))
        return ("All", {WORKER}) if clean else ("None", set())
