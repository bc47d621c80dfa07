"""AscendJob (MindCluster): a PyTorch Master and one Worker on Ascend NPUs, two NPUs each."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import AscendJobOperator
from dags_examples._sim import simulate

with DAG("example_ascend", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    AscendJobOperator(
        task_id="train",
        framework="pytorch",
        image="pytorch-test:latest",
        command=["/bin/bash", "-c"],
        args=["cd /job/code/scripts && bash train_start.sh /job/code /job/output main.py --dist-backend=hccl"],
        replicas=2,
        npus=2,
        restart_policy="ExitCode",
        pod_annotations=simulate("3s"),
        deferrable=True,
    )
