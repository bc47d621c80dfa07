"""The DAG of team B for the UI tests: team A's users may not see its job."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

with DAG("t9k_ui_b", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True)  # runs until the test ends
