"""The envelope PyTorch, TensorFlow and XGBoost training jobs share (job-kinds.md, 1.0).

``replicaSpecs`` is an array of ``{type, replicas, restartPolicy, template}`` whose order
decides ranks; ``restartPolicy`` is ``Never | OnFailure | Always | ExitCode``; restarts
share one budget, ``runPolicy.backoffLimit`` (default 3); ``runPolicy.activeDeadlineSeconds``
and ``runPolicy.cleanUpPolicy`` apply. One replica, the master, decides the job. Each kind
names its training container, its master, its port and the environment it injects.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from airflow_t9k.kinds.base import (
    DEFAULT_CLEANUP_POLICY,
    DEFAULT_RESTART_LIMIT,
    MAX_REPLICAS_PER_TYPE,
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


def run_policy(job: Obj) -> Obj:
    return (job.get("spec") or {}).get("runPolicy") or {}


class TrainingJobKind(JobKind):
    port: ClassVar[int]
    port_name: ClassVar[str]
    default_restart: ClassVar[str] = "OnFailure"
    allowed_types: ClassVar[tuple[str, ...] | None] = None  # None: any DNS label

    # -- spec -----------------------------------------------------------------------------
    def backoff_limit(self, job: Obj) -> int:
        limit = run_policy(job).get("backoffLimit", DEFAULT_RESTART_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise InvalidSpec(f"runPolicy.backoffLimit must be a non-negative integer, got {limit!r}")
        return limit

    def active_deadline(self, job: Obj) -> int | None:
        return run_policy(job).get("activeDeadlineSeconds")

    def replica_specs(self, job: Obj) -> list[ReplicaSpec]:
        return self.scaled(job, self.declared_specs(job))

    def declared_specs(self, job: Obj) -> list[ReplicaSpec]:
        """The replica types as written, before Elastic scaling."""
        limit = self.backoff_limit(job)
        out = []
        for i, raw in enumerate((job.get("spec") or {}).get("replicaSpecs") or []):
            if not isinstance(raw, dict) or not raw.get("type"):
                raise InvalidSpec(f"replicaSpecs[{i}].type is required")
            if self.allowed_types is not None and raw["type"] not in self.allowed_types:
                raise InvalidSpec(f"replicaSpecs[{i}].type must be one of {', '.join(self.allowed_types)}, got {raw['type']!r}")
            policy = raw.get("restartPolicy", self.default_restart)
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

    # -- Elastic (PyTorch and DeepSpeed) ---------------------------------------------------
    def elastic(self, job: Obj) -> Obj | None:
        if not self.supports_elastic:
            return None  # validate() refuses spec.elastic on these kinds
        elastic = (job.get("spec") or {}).get("elastic") or {}
        return elastic if elastic.get("enabled") else None

    @staticmethod
    def bounds(elastic: Obj, default: int) -> tuple[int, int]:
        low = int(elastic.get("minReplicas", 1))
        return low, int(elastic.get("maxReplicas", max(default, low)))

    def scaled(self, job: Obj, specs: list[ReplicaSpec]) -> list[ReplicaSpec]:
        """An elastic job's one replica type runs ``expectedReplicas`` clamped to [min, max]
        (its ``replicas``, clamped, when ``expectedReplicas`` is absent)."""
        elastic = self.elastic(job)
        if elastic is None or len(specs) != 1:
            return specs
        low, high = self.bounds(elastic, specs[0].replicas)
        wanted = elastic.get("expectedReplicas", specs[0].replicas)
        return [dataclasses.replace(specs[0], replicas=min(max(int(wanted), low), high))]

    def check_elastic(self, job: Obj, specs: list[ReplicaSpec]) -> None:
        elastic = self.elastic(job)
        if elastic is None:
            return
        if len(specs) != 1:
            raise InvalidSpec("elastic mode scales one replica type: give spec.replicaSpecs exactly one entry")
        low, high = self.bounds(elastic, 1)
        if not 1 <= low <= high:
            raise InvalidSpec(f"elastic needs 1 <= minReplicas <= maxReplicas, got {low} and {high}")
        if high > MAX_REPLICAS_PER_TYPE:
            raise InvalidSpec(f"elastic.maxReplicas is {high}; at most {MAX_REPLICAS_PER_TYPE} per replica type")

    def status_extra(self, job: Obj, running: int) -> Obj:
        """``status.elastic`` for the scale subresource (HPA reads the selector)."""
        if self.elastic(job) is None:
            return {}
        selector = f"batch.tensorstack.dev/job-name={job['metadata']['name']},batch.tensorstack.dev/job-kind={job['kind']}"
        return {"elastic": {"currentReplicas": running, "selector": selector}}

    def master(self, job: Obj) -> tuple[str, int]:
        """The replica that decides the job: by default the first type's rank 0."""
        return self.replica_specs(job)[0].type, 0

    def validate(self, job: Obj) -> None:
        super().validate(job)
        self.check_elastic(job, self.declared_specs(job))
        rtype, rank = self.master(job)
        counts = {s.type: s.replicas for s in self.replica_specs(job)}
        if counts.get(rtype, 0) <= rank:
            raise InvalidSpec(f"{rtype} {rank} decides the job, but replicaSpecs has no such replica")

    def success_rules(self, job: Obj) -> list[Rule]:
        rtype, rank = self.master(job)
        return [{rtype: [rank]}]

    def failure_rules(self, job: Obj) -> list[Rule]:
        return self.success_rules(job)

    def cleanup_types(self, job: Obj) -> tuple[str, set[str]] | None:
        return (run_policy(job).get("cleanUpPolicy") or DEFAULT_CLEANUP_POLICY, {s.type for s in self.replica_specs(job)})

    # -- children -------------------------------------------------------------------------
    def service_ports(self, job: Obj) -> list[Obj]:
        return [{"name": self.port_name, "port": self.port}]

    def main_container(self, pod_spec: Obj) -> Obj | None:
        return container_named(pod_spec, self.training_container) or container_named(pod_spec, None)

    def ranks(self, job: Obj) -> tuple[dict[str, int], int]:
        """Offset of each type's first global rank, and the world size."""
        offsets, total = {}, 0
        for s in self.replica_specs(job):
            offsets[s.type] = total
            total += s.replicas
        return offsets, total

    def address(self, job: Obj, rtype: str, rank: int) -> str:
        return f"{self.service_name(job, rtype, rank)}:{self.port}"

    def environment(self, job: Obj, spec: ReplicaSpec, rank: int) -> dict[str, str]:
        raise NotImplementedError

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        main = self.main_container(pod["spec"])
        if main is None:
            return
        set_env(main, {"PYTHONUNBUFFERED": "1", **self.environment(job, spec, rank)})
        ports = main.setdefault("ports", [])
        if not any(p.get("containerPort") == self.port for p in ports):
            ports.append({"name": self.port_name, "containerPort": self.port})
