"""ColossalAIJob: a launcher runs `colossalai run` over SSH on two GPU workers."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import ColossalAIJobOperator

with DAG("example_colossalai", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    ColossalAIJobOperator(
        task_id="train",
        image="hpcaitech/colossalai:0.3.0",
        command=["train.py", "--epochs", "3"],
        replicas=2,
        machine_type="2U8G1P",
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
