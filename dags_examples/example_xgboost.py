"""XGBoostTrainingJob: one master and two workers."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import XGBoostTrainingJobOperator

with DAG("example_xgboost", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    XGBoostTrainingJobOperator(
        task_id="train",
        image="xgboost/xgboost:2.1.0",
        command=["python", "train.py"],
        replicas=3,
        machine_type="2U8G0P",
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
