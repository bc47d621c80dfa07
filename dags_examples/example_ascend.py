"""AscendJob (MindCluster): a PyTorch Master and one Worker on Ascend NPUs, two NPUs each."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import AscendJobOperator

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
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
