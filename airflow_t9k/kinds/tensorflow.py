"""TensorFlowTrainingJob: ``TF_CONFIG`` for chief, worker, ps and evaluator replicas.

The cluster spec lists every type but the evaluator (which only reads checkpoints), by
Service address; the task is the replica's own type and index. The chief decides the job,
or worker 0 when there is no chief. The training container is the one named
``tensorflow`` (required by the T9k manual).
"""

from __future__ import annotations

import json

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import InvalidSpec, Obj, ReplicaSpec, container_named
from airflow_t9k.kinds.training import TrainingJobKind

TYPES = ("chief", "worker", "ps", "evaluator")


class TensorFlowTrainingJob(TrainingJobKind):
    resource = RESOURCES["TensorFlowTrainingJob"]
    training_container = "tensorflow"
    allowed_types = TYPES
    port = 2222
    port_name = "tfjob-port"

    def master(self, job: Obj) -> tuple[str, int]:
        counts = {s.type: s.replicas for s in self.replica_specs(job)}
        if counts.get("chief"):
            return "chief", 0
        if counts.get("worker"):
            return "worker", 0
        raise InvalidSpec("a TensorFlowTrainingJob needs a chief or at least one worker to decide when it is done")

    def validate(self, job: Obj) -> None:
        super().validate(job)
        for s in self.replica_specs(job):
            if container_named((s.template.get("spec") or {}), self.training_container) is None:
                raise InvalidSpec(f"replicaSpecs[{s.type}].template must contain a container named 'tensorflow'")

    def tf_config(self, job: Obj, rtype: str, rank: int) -> str:
        cluster = {
            s.type: [self.address(job, s.type, i) for i in range(s.replicas)]
            for s in self.replica_specs(job)
            if s.type != "evaluator" and s.replicas
        }
        return json.dumps(
            {"cluster": cluster, "task": {"type": rtype, "index": rank}, "environment": "cloud"}, separators=(",", ":")
        )

    def environment(self, job: Obj, spec: ReplicaSpec, rank: int) -> dict[str, str]:
        return {"TF_CONFIG": self.tf_config(job, spec.type, rank)}
