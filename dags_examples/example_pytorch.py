"""PyTorchTrainingJob: DDP over two nodes; MASTER_ADDR, RANK and WORLD_SIZE are injected."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator

with DAG("example_pytorch", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    PyTorchTrainingJobOperator(
        task_id="train",
        image="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        command=["python", "-m", "torch.distributed.run", "--nproc_per_node=1", "train.py"],
        replicas=2,
        machine_type="4U16G1P",
        spec={"runPolicy": {"backoffLimit": 2, "cleanUpPolicy": "Unfinished"}},
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
