"""A team A task whose own code records a job it did not submit (tests/security/test_ui_tenancy.py):
it pushes XCom ``t9k_job``, and the state store's ``t9k_jobs``, naming whatever the run's conf
gives, as any task's code can."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG
from airflow.sdk.bases.operator import BaseOperator


class RecordAnything(BaseOperator):
    def execute(self, context):
        record = context["dag_run"].conf["record"]
        context["ti"].xcom_push(key="t9k_job", value=record)
        store = context.get("task_state_store")
        if store is not None:  # the T9k Job tab's earlier attempts read this key
            store.set("t9k_jobs", [{"try": 0, **record}])


with DAG("t9k_ui_xcom", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    RecordAnything(task_id="train")
