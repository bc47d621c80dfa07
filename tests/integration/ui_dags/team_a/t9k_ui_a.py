"""DAGs of team A for the UI tests (tests/integration/test_ui.py): a three-replica job that
runs for a while, and one that runs until paused, resumed and deleted from the UI."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

START = datetime(2026, 1, 1)

with DAG("t9k_ui_a", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=3, pod_annotations={"sim.t9k.test/duration": "18s"},
                       deferrable=True)  # fmt: skip

with DAG("t9k_ui_pause", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True)  # runs until deleted
