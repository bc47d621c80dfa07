"""DAGs for test_e2e_delivery.py's overlapping runs (overlap=, issue 48 item 3): each job's pod runs
until the test releases it, so the first run's job still holds its pod when the second run starts."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

START = datetime(2026, 1, 1)

for mode in ("skip", "wait", "supersede"):
    with DAG(f"t9k_overlap_{mode}", start_date=START, schedule=None, catchup=False, max_active_runs=4):
        GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True, log_events=False,
                           stream_logs=False, overlap=mode)  # fmt: skip
