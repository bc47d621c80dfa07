"""PyTorchTrainingJob: ranked replicas with torch.distributed's environment.

``replicaSpecs`` is an array whose order decides ranks; the first type's replica 0 is the
master (``MASTER_ADDR``), and it alone decides success and failure. Restarts follow each
type's ``restartPolicy`` (``ExitCode`` retries only 130, 137, 143 and 138) and share one
budget, ``runPolicy.backoffLimit`` (default 3), counted in ``status.backoffCount``.
Elastic mode and torchrun launch are not reconciled yet: a job asking for them fails with
a condition that says so, rather than running without them.
"""

from __future__ import annotations

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import (
    DEFAULT_RESTART_LIMIT,
    TRAINING_RESTART_POLICIES,
    InvalidSpec,
    JobKind,
    Obj,
    ReplicaSpec,
    RestartPolicy,
    Rule,
    container_named,
    set_env,
)

MASTER_PORT = 23456


def _run_policy(job: Obj) -> Obj:
    return (job.get("spec") or {}).get("runPolicy") or {}


class PyTorchTrainingJob(JobKind):
    resource = RESOURCES["PyTorchTrainingJob"]
    training_container = "pytorch"

    def main_container(self, pod_spec: Obj) -> Obj | None:
        return container_named(pod_spec, "pytorch") or container_named(pod_spec, "python") or container_named(pod_spec, None)

    def backoff_limit(self, job: Obj) -> int:
        limit = _run_policy(job).get("backoffLimit", DEFAULT_RESTART_LIMIT)
        if not isinstance(limit, int) or limit < 0:
            raise InvalidSpec(f"runPolicy.backoffLimit must be a non-negative integer, got {limit!r}")
        return limit

    def active_deadline(self, job: Obj) -> int | None:
        return _run_policy(job).get("activeDeadlineSeconds")

    def replica_specs(self, job: Obj) -> list[ReplicaSpec]:
        limit = self.backoff_limit(job)
        out = []
        for i, raw in enumerate((job.get("spec") or {}).get("replicaSpecs") or []):
            if not isinstance(raw, dict) or not raw.get("type"):
                raise InvalidSpec(f"replicaSpecs[{i}].type is required")
            policy = raw.get("restartPolicy", "OnFailure")
            if policy not in TRAINING_RESTART_POLICIES:
                raise InvalidSpec(f"replicaSpecs[{i}].restartPolicy must be one of {', '.join(TRAINING_RESTART_POLICIES)}")
            template = raw.get("template")
            if not isinstance(template, dict):
                raise InvalidSpec(f"replicaSpecs[{i}].template is required")
            replicas = raw.get("replicas", 1)
            if not isinstance(replicas, int) or isinstance(replicas, bool):
                raise InvalidSpec(f"replicaSpecs[{i}].replicas must be an integer, got {replicas!r}")
            out.append(ReplicaSpec(raw["type"], replicas, template, RestartPolicy(policy, limit if policy != "Never" else 0)))
        if not out:
            raise InvalidSpec("spec.replicaSpecs must list at least one replica type")
        return out

    def validate(self, job: Obj) -> None:
        super().validate(job)
        spec = job.get("spec") or {}
        if (spec.get("elastic") or {}).get("enabled"):
            raise InvalidSpec("elastic mode is not supported by the bundled controller yet (spec.elastic.enabled)")
        if (spec.get("torchrunConfig") or {}).get("enabled"):
            raise InvalidSpec("torchrun launch is not supported by the bundled controller yet (spec.torchrunConfig.enabled)")
        first = self.replica_specs(job)[0]
        if first.replicas < 1:
            raise InvalidSpec(f"the first replica type ({first.type}) is the master and needs at least one replica")

    def _master(self, job: Obj) -> str:
        return self.service_name(job, self.replica_specs(job)[0].type, 0)

    def success_rules(self, job: Obj) -> list[Rule]:
        return [{self.replica_specs(job)[0].type: [0]}]

    def failure_rules(self, job: Obj) -> list[Rule]:
        return [{self.replica_specs(job)[0].type: [0]}]

    def service_ports(self, job: Obj) -> list[Obj]:
        return [{"name": "pytorch", "port": MASTER_PORT}]

    def cleanup_types(self, job: Obj) -> tuple[str, set[str]] | None:
        return (_run_policy(job).get("cleanUpPolicy") or "None", set(s.type for s in self.replica_specs(job)))

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        specs = self.replica_specs(job)
        offset = 0
        for s in specs:
            if s.type == spec.type:
                break
            offset += s.replicas
        world = sum(s.replicas for s in specs)
        global_rank = offset + rank
        main = self.main_container(pod["spec"])
        if main is None:
            return
        master = self._master(job)
        set_env(main, {
            "PYTHONUNBUFFERED": "1",
            "MASTER_ADDR": master, "MASTER_PORT": str(MASTER_PORT),
            "RANK": str(global_rank), "WORLD_SIZE": str(world),
            "PET_MASTER_ADDR": master, "PET_MASTER_PORT": str(MASTER_PORT),
            "PET_NNODES": str(world), "PET_NODE_RANK": str(global_rank),
        })  # fmt: skip
        ports = main.setdefault("ports", [])
        if not any(p.get("containerPort") == MASTER_PORT for p in ports):
            ports.append({"name": "pytorch", "containerPort": MASTER_PORT})
