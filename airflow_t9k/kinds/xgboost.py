"""XGBoostTrainingJob: a required master and workers, with Rabit's tracker environment.

``MASTER_ADDR``/``MASTER_PORT`` point at master 0 (the tracker); ``RANK`` is 0 for the
master and 1.. for workers; ``WORLD_SIZE`` counts every replica; ``WORKER_ADDRS`` lists the
workers, as Kubeflow's XGBoostJob sets it. The master decides the job.
"""

from __future__ import annotations

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import InvalidSpec, Obj, ReplicaSpec
from airflow_t9k.kinds.training import TrainingJobKind


class XGBoostTrainingJob(TrainingJobKind):
    resource = RESOURCES["XGBoostTrainingJob"]
    training_container = "xgboost"
    allowed_types = ("master", "worker")
    port = 9999
    port_name = "xgboostjob-port"

    def master(self, job: Obj) -> tuple[str, int]:
        if not any(s.type == "master" and s.replicas for s in self.replica_specs(job)):
            raise InvalidSpec("an XGBoostTrainingJob needs a master replica (replicaSpecs type 'master')")
        return "master", 0

    def environment(self, job: Obj, spec: ReplicaSpec, rank: int) -> dict[str, str]:
        specs = {s.type: s.replicas for s in self.replica_specs(job)}
        workers = specs.get("worker", 0)
        global_rank = rank if spec.type == "master" else specs.get("master", 0) + rank
        return {
            "MASTER_ADDR": self.service_name(job, "master", 0),
            "MASTER_PORT": str(self.port),
            "RANK": str(global_rank),
            "WORLD_SIZE": str(specs.get("master", 0) + workers),
            "WORKER_PORT": str(self.port),
            "WORKER_ADDRS": ",".join(self.service_name(job, "worker", i) for i in range(workers)),
        }
