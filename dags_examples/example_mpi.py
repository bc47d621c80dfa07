"""MPIJob: `mpirun` from a launcher over five sshd workers."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import MPIJobOperator

with DAG("example_mpi", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    MPIJobOperator(
        task_id="simulate",
        image="t9kpublic/mpi-tutorial:2021022-2",
        command=["./random_walk", "20", "40", "2"],
        replicas=5,
        machine_type="1U2G0P",
        spec={"mca": {"btl": "^openib"}, "runPolicy": {"cleanUpWorkers": True}},
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
