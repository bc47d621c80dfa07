"""DeepSpeedJob: every worker runs sshd; worker 0 also runs ``deepspeed`` over pdsh.

Reserved paths (T9k manual): ``/root/.ssh`` (the generated keys: worker 0, the launcher, gets
the private user key; every worker the host key its sshd serves), ``/t9k/hostfile`` (lines
``<host> slots=<slotsPerWorker>``) and ``/root/.deepspeed_env`` (the worker container's
plain ``env`` values, which the pdsh launcher exports on every host; off with
``disableCustomEnv``). Worker 0 writes that file at start from its own environment: the
values (possibly secrets) stay in the pod spec and are never copied into a ConfigMap, which
more people may read than the job. The command is built from ``config``: ``run.python`` (a script),
``run.module`` (``--module``) or ``run.exec`` (``--no_python``), plus ``--no_local_rank``
when ``localRank`` is false, ``--autotuning run|tune``, and ``otherArgs``; or
``customCommand`` verbatim. Restarts and success follow the training envelope, decided by
worker 0.

Elastic: ``elastic.expectedReplicas`` (clamped to [min, max]; the scale subresource) sets the
number of workers. On a change the hostfile ConfigMap is rewritten and worker 0 (the pdsh
launcher, started with ``--elastic_training --min_elastic_nodes --max_elastic_nodes``) is
recreated, so deepspeed relaunches over the new hosts and resumes from its checkpoint; the
other workers only run sshd and stay.
"""

from __future__ import annotations

import hashlib
import shlex

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import Children, InvalidSpec, ModeOverride, Obj, ReplicaSpec, set_env
from airflow_t9k.kinds.ssh_launch import LAUNCHER_FILES, SSHD_FILES, ssh_volume, sshd_command, wait_for_ssh
from airflow_t9k.kinds.training import TrainingJobKind

WORKER = "worker"
SSH_DIR = "/root/.ssh"
HOSTFILE_DIR = "/t9k"
HOSTFILE = f"{HOSTFILE_DIR}/hostfile"
ENV_FILE = "/root/.deepspeed_env"
SSHD = "/usr/sbin/sshd"
ANNOTATION_HOSTFILE = "batch.tensorstack.dev/hostfile-hash"
RUN_KEYS = ("python", "module", "exec")


def _spec(job: Obj) -> Obj:
    return job.get("spec") or {}


class DeepSpeedJob(TrainingJobKind):
    resource = RESOURCES["DeepSpeedJob"]
    training_container = WORKER
    port = 22
    port_name = "ssh"
    restarts_as_group = True  # worker 0's pdsh session spans every worker

    def declared_specs(self, job: Obj) -> list[ReplicaSpec]:
        worker = _spec(job).get("worker")
        if not isinstance(worker, dict) or not isinstance(worker.get("template"), dict):
            raise InvalidSpec("spec.worker.template is required")
        replicas = worker.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise InvalidSpec(f"spec.worker.replicas must be an integer >= 1, got {replicas!r}")
        wrapped = {**job, "spec": {**_spec(job), "replicaSpecs": [{"type": WORKER, **worker}]}}
        return super().declared_specs(wrapped)

    def config(self, job: Obj) -> Obj:
        return _spec(job).get("config") or {}

    def validate(self, job: Obj) -> None:
        super().validate(job)
        config = self.config(job)
        slots = config.get("slotsPerWorker", 1)
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
            raise InvalidSpec(f"spec.config.slotsPerWorker must be an integer >= 1, got {slots!r}")
        if config.get("autotune", "none") not in ("none", "run", "tune"):
            raise InvalidSpec(f"spec.config.autotune must be none, run or tune, got {config.get('autotune')!r}")
        if config.get("customCommand"):
            return
        given = [k for k in RUN_KEYS if (config.get("run") or {}).get(k)]
        if len(given) != 1:
            raise InvalidSpec("spec.config.run needs exactly one of python, module or exec (or set config.customCommand)")

    def hosts(self, job: Obj) -> list[str]:
        return [self.service_name(job, WORKER, i) for i in range(self.replica_specs(job)[0].replicas)]

    def deepspeed_command(self, job: Obj) -> str:
        config = self.config(job)
        if config.get("customCommand"):
            return str(config["customCommand"])
        parts = ["deepspeed", "--hostfile", HOSTFILE, "--launcher", "pdsh"]
        if config.get("localRank", True) is False:
            parts.append("--no_local_rank")
        if config.get("autotune", "none") != "none":
            parts += ["--autotuning", config["autotune"]]
        elastic = self.elastic(job)
        if elastic is not None:
            low, high = self.bounds(elastic, self.declared_specs(job)[0].replicas)
            parts += ["--elastic_training", f"--min_elastic_nodes={low}", f"--max_elastic_nodes={high}"]
        parts += [str(a) for a in config.get("otherArgs") or []]
        run = config.get("run") or {}
        key = next(k for k in RUN_KEYS if run.get(k))
        parts += {"python": [], "module": ["--module"], "exec": ["--no_python"]}[key]
        return shlex.join(parts + [str(a) for a in run[key]])

    def env_names(self, job: Obj) -> list[str]:
        """The worker container's env variables with a plain value: those pdsh exports."""
        main = self.main_container(self.replica_specs(job)[0].template.get("spec") or {}) or {}
        return [str(e["name"]) for e in main.get("env") or [] if isinstance(e.get("value"), str) and e.get("name")]

    def write_env_file(self, job: Obj) -> str:
        """Shell writing ENV_FILE (``NAME=value`` lines) from the container's own environment."""
        names = " ".join(shlex.quote(n) for n in self.env_names(job))
        return f': > {ENV_FILE}; for n in {names}; do printf "%s=%s\\n" "$n" "$(printenv "$n")" >> {ENV_FILE}; done'

    def ssh_secret_name(self, job: Obj) -> str:
        return f"{job['metadata']['name']}-ssh"

    def hostfile(self, job: Obj) -> str:
        slots = self.config(job).get("slotsPerWorker", 1)
        return "".join(f"{h} slots={slots}\n" for h in self.hosts(job))

    def outdated(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> bool:
        """Worker 0 launched over another set of hosts than the job has now (after a rescale)."""
        if rank != 0 or self.elastic(job) is None:
            return False
        annotations = pod.get("metadata", {}).get("annotations") or {}
        return annotations.get(ANNOTATION_HOSTFILE) not in (None, _digest(self.hostfile(job)))

    def extra_children(self, job: Obj, observed: Children) -> list[Obj]:
        name = job["metadata"]["name"]
        data = {"hostfile": self.hostfile(job)}
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-deepspeed"}, "data": data}]

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        name = job["metadata"]["name"]
        pod_spec = pod["spec"]
        main = self.main_container(pod_spec)
        if main is None:
            return
        volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in ("t9k-ssh", "t9k-deepspeed")]
        # Worker 0 launches (pdsh reaches every worker, itself included): it alone holds the user key.
        files = LAUNCHER_FILES + SSHD_FILES if rank == 0 else SSHD_FILES
        volumes += [
            ssh_volume(self.ssh_secret_name(job), files),
            {"name": "t9k-deepspeed", "configMap": {"name": f"{name}-deepspeed"}},
        ]
        mounts = [{"name": "t9k-ssh", "mountPath": SSH_DIR},
                  {"name": "t9k-deepspeed", "mountPath": HOSTFILE, "subPath": "hostfile", "readOnly": True}]  # fmt: skip
        sshd = sshd_command(SSHD, SSH_DIR)
        if rank == 0:
            pod["metadata"]["annotations"][ANNOTATION_HOSTFILE] = _digest(self.hostfile(job))
            env = "" if _spec(job).get("disableCustomEnv") else f"{self.write_env_file(job)}; "
            daemon = shlex.join([c for c in sshd if c not in ("-D", "-e")])  # sshd forks into the background here
            main["command"] = [
                "bash",
                "-c",
                f"set -e; {daemon}; {env}{wait_for_ssh(HOSTFILE)}; exec {self.deepspeed_command(job)}",
            ]
        else:
            main["command"] = sshd
        main.pop("args", None)
        set_env(main, {"T9K_JOB_NAME": name, "T9K_REPLICA_RANK": str(rank)})
        main["volumeMounts"] = [
            m for m in main.get("volumeMounts") or [] if m.get("name") not in ("t9k-ssh", "t9k-deepspeed")
        ] + mounts
        ports = main.setdefault("ports", [])
        if not any(p.get("containerPort") == self.port for p in ports):
            ports.append({"name": self.port_name, "containerPort": self.port})
        pod_spec["volumes"] = volumes

    def debug_default(self, rtype: str) -> ModeOverride:
        # Every worker keeps sshd, so deepspeed can be launched by hand from worker 0.
        return ModeOverride(command=sshd_command(SSHD, SSH_DIR), args=[])


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
