"""XGBoostTrainingJob: one master and two workers."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import XGBoostTrainingJobOperator
from dags_examples._sim import simulate

with DAG("example_xgboost", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    XGBoostTrainingJobOperator(
        task_id="train",
        image="xgboost/xgboost:2.1.0",
        command=["python", "train.py"],
        replicas=3,
        machine_type="2U8G0P",
        pod_annotations=simulate("3s"),
        deferrable=True,
    )
