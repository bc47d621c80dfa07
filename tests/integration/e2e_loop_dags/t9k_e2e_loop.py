"""A Task Loop (Airflow 3.4, AIP-111) whose body trains a job: two iterations, two trainings
(tests/integration/test_e2e_loops.py). Airflow 3.3 cannot parse it: only the 3.4 leg
(``make test-airflow-next``) runs it."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task_group

from airflow_t9k.operators.kinds import GenericJobOperator

with DAG("t9k_e2e_loop", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):

    @task_group
    def retrain():
        # 10 s: a job that ends within seconds of its task deferring meets Airflow's stale
        # defer-exit race (apache/airflow#72716, docs/airflow.md "Known limits").
        GenericJobOperator(
            task_id="train",
            image="busybox",
            replicas=1,
            deferrable=True,
            pod_annotations={"sim.t9k.test/duration": "10s", "sim.t9k.test/message": '{"loss": 0.5}'},
        )

    retrain.loop(max_iterations=2)
