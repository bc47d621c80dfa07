"""PyTorchTrainingJob: torch.distributed's environment on ranked replicas, torchrun, Elastic.

The first type's replica 0 is the master (``MASTER_ADDR``) and decides the job; ``RANK`` is
global in ``replicaSpecs`` order and ``WORLD_SIZE`` the number of replicas, with torchrun's
``PET_*`` equivalents.

With ``torchrunConfig.enabled`` the training container runs
``torchrun --nnodes ... --nproc_per_node ... --max_restarts ... --rdzv_backend ...
--rdzv_endpoint <master>:23456 --rdzv_id <job uid> <extraOptions> <container args>`` (its own
``command`` is ignored, as the T9k manual says). Elastic mode needs torchrun and exactly one
replica type: that type runs ``expectedReplicas`` pods clamped to ``[minReplicas,
maxReplicas]`` (or its ``replicas`` clamped, when ``expectedReplicas`` is absent), with
``--nnodes=min:max`` so torchrun re-forms the group as pods come and go. ``expectedReplicas``
is the CRD's scale subresource, so ``kubectl scale`` and an HPA drive it.
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

    def torchrun(self, job: Obj) -> Obj | None:
        config = (job.get("spec") or {}).get("torchrunConfig") or {}
        return config if config.get("enabled") else None

    def validate(self, job: Obj) -> None:
        if self.elastic(job) is not None and not self.torchrun(job):
            raise InvalidSpec(
                "elastic mode needs torchrun: set spec.torchrunConfig.enabled (T9k runs elastic jobs only in torchrun mode)"
            )
        super().validate(job)
        config = self.torchrun(job)
        if config is not None and config.get("rdzvBackend", "c10d") not in ("c10d", "etcd", "etcd-v2"):
            raise InvalidSpec(f"torchrunConfig.rdzvBackend must be c10d, etcd or etcd-v2, got {config.get('rdzvBackend')!r}")

    def torchrun_command(self, job: Obj, args: list[str]) -> list[str]:
        config = self.torchrun(job) or {}
        elastic = self.elastic(job)
        specs = self.replica_specs(job)
        nnodes = (
            "{}:{}".format(*self.bounds(elastic, self.declared_specs(job)[0].replicas))
            if elastic
            else str(sum(s.replicas for s in specs))
        )
        return [
            "torchrun", f"--nnodes={nnodes}", f"--nproc_per_node={config.get('procPerNode', '1')}",
            f"--max_restarts={config.get('maxRestarts', 3)}", f"--rdzv_backend={config.get('rdzvBackend', 'c10d')}",
            f"--rdzv_endpoint={self.service_name(job, *self.master(job))}:{self.port}",
            f"--rdzv_id={job['metadata'].get('uid', job['metadata']['name'])}",
            *[str(o) for o in config.get("extraOptions") or []], *args,
        ]  # fmt: skip

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        super().customize_pod(job, spec, rank, pod)
        main = self.main_container(pod["spec"])
        if main is not None and self.torchrun(job):
            main["command"] = self.torchrun_command(job, [str(a) for a in main.pop("args", None) or []])

    def environment(self, job: Obj, spec: ReplicaSpec, rank: int) -> dict[str, str]:
        offsets, world = self.ranks(job)
        master = self.service_name(job, *self.master(job))
        global_rank = str(offsets[spec.type] + rank)
        return {
            "MASTER_ADDR": master, "MASTER_PORT": str(self.port), "RANK": global_rank, "WORLD_SIZE": str(world),
            "PET_MASTER_ADDR": master, "PET_MASTER_PORT": str(self.port), "PET_NNODES": str(world), "PET_NODE_RANK": global_rank,
        }  # fmt: skip
