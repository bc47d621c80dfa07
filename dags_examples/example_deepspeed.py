"""DeepSpeedJob: worker 0 runs `deepspeed` over pdsh on four workers."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import DeepSpeedJobOperator

with DAG("example_deepspeed", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    DeepSpeedJobOperator(
        task_id="train",
        image="deepspeed/deepspeed:v0.14.0",
        command=["train.py", "--deepspeed", "--deepspeed_config=ds.json"],
        replicas=4,
        machine_type="8U32G1P",
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
