"""PyTorchTrainingJob: DDP over two nodes; MASTER_ADDR, RANK and WORLD_SIZE are injected."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator
from dags_examples._sim import simulate

with DAG("example_pytorch", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    PyTorchTrainingJobOperator(
        task_id="train",
        image="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        command=["python", "-m", "torch.distributed.run", "--nproc_per_node=1", "train.py"],
        replicas=2,
        machine_type="4U16G1P",
        spec={"runPolicy": {"backoffLimit": 2, "cleanUpPolicy": "Unfinished"}},
        pod_annotations=simulate("3s"),
        deferrable=True,
    )
