"""DAGs for the triggerer tests of tests/chaos/test_triggerer_kill.py that are not kills.

``t9k_chaos_moved``: two deferrable tasks whose jobs run until the test releases them, one with
each ``on_kill_action`` that acts on the job; their triggers move to another triggerer while the
first is frozen. ``t9k_chaos_trigger_error``: one task with ``delete_on_finish="always"`` whose
triggerer may not read its job (the trigger's ``error``), and no retry."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

with DAG("t9k_chaos_moved", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    for action in ("delete", "pause"):
        GenericJobOperator(task_id=f"on_kill_{action}", image="busybox", replicas=1, deferrable=True, on_kill_action=action)

with DAG("t9k_chaos_trigger_error", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    GenericJobOperator(task_id="job", image="busybox", replicas=1, deferrable=True, delete_on_finish="always", retries=0)
