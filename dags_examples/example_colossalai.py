"""ColossalAIJob: a launcher runs `colossalai run` over SSH on two GPU workers."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import ColossalAIJobOperator
from dags_examples._sim import simulate

with DAG("example_colossalai", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    ColossalAIJobOperator(
        task_id="train",
        image="hpcaitech/colossalai:0.3.0",
        command=["train.py", "--epochs", "3"],
        replicas=2,
        machine_type="2U8G1P",
        pod_annotations=simulate("3s"),
        deferrable=True,
    )
