"""T9kJobOperator from a templated YAML file, then a sensor that waits on that job by name."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.job import T9kJobOperator
from airflow_t9k.sensors.job import T9kJobSensor

with DAG(
    "example_yaml_and_sensor",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    params={"workers": 2},
    tags=["t9k", "example"],
):
    submit = T9kJobOperator(task_id="submit", job="jobs/generic-tf-config.yaml", wait_for_completion=False)
    wait = T9kJobSensor(
        task_id="wait",
        kind="GenericJob",
        name="{{ ti.xcom_pull(task_ids='submit', key='t9k_job')['name'] }}",
        namespace="{{ ti.xcom_pull(task_ids='submit', key='t9k_job')['namespace'] }}",
        poke_interval=2,
        timeout=300,
        deferrable=True,
    )
    submit >> wait
