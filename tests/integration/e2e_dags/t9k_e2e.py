"""DAGs for the end-to-end tests with a real scheduler and triggerer."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

START = datetime(2026, 1, 1)

with DAG("t9k_e2e_defer", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="job", image="busybox", replicas=2, pod_annotations={"sim.t9k.test/duration": "8s"}, deferrable=True)

with DAG("t9k_e2e_kill", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="job", image="busybox", replicas=1, deferrable=True)  # runs until killed

with DAG("t9k_e2e_retry", start_date=START, schedule=None, catchup=False,
         default_args={"retries": 1, "retry_delay": timedelta(seconds=1)}):
    GenericJobOperator(task_id="job", image="busybox", replicas=1, pod_annotations={"sim.t9k.test/duration": "25s"}, deferrable=False)
