"""PyTorchTrainingJob: torch.distributed's environment on ranked replicas.

The first type's replica 0 is the master (``MASTER_ADDR``) and decides the job; ``RANK`` is
global in ``replicaSpecs`` order and ``WORLD_SIZE`` the number of replicas, with torchrun's
``PET_*`` equivalents. Elastic mode and torchrun launch are not reconciled yet: a job asking
for them fails with a condition that says so, rather than running without them.
"""

from __future__ import annotations

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import InvalidSpec, Obj, ReplicaSpec, container_named
from airflow_t9k.kinds.training import TrainingJobKind


class PyTorchTrainingJob(TrainingJobKind):
    resource = RESOURCES["PyTorchTrainingJob"]
    training_container = "pytorch"
    port = 23456
    port_name = "pytorch"

    def main_container(self, pod_spec: Obj) -> Obj | None:
        return container_named(pod_spec, "pytorch") or container_named(pod_spec, "python") or container_named(pod_spec, None)

    def validate(self, job: Obj) -> None:
        super().validate(job)
        spec = job.get("spec") or {}
        if (spec.get("elastic") or {}).get("enabled"):
            raise InvalidSpec("elastic mode is not supported by the bundled controller yet (spec.elastic.enabled)")
        if (spec.get("torchrunConfig") or {}).get("enabled"):
            raise InvalidSpec("torchrun launch is not supported by the bundled controller yet (spec.torchrunConfig.enabled)")

    def environment(self, job: Obj, spec: ReplicaSpec, rank: int) -> dict[str, str]:
        offsets, world = self.ranks(job)
        master = self.service_name(job, *self.master(job))
        global_rank = str(offsets[spec.type] + rank)
        return {
            "MASTER_ADDR": master, "MASTER_PORT": str(self.port), "RANK": global_rank, "WORLD_SIZE": str(world),
            "PET_MASTER_ADDR": master, "PET_MASTER_PORT": str(self.port), "PET_NNODES": str(world), "PET_NODE_RANK": global_rank,
        }  # fmt: skip
