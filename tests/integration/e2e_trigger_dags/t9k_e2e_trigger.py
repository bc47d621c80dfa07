"""DAGs for test_e2e_trigger.py: what a real triggerer does when the wait cannot go on as usual."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator
from airflow_t9k.sensors.job import T9kJobSensor

START = datetime(2026, 1, 1)
GPUS = {"limits": {"nvidia.com/gpu": "16"}, "requests": {"nvidia.com/gpu": "16"}}  # kwok nodes advertise 8

# A ServiceAccount that may create and get jobs but not list or watch them: the worker submits,
# the triggerer cannot watch.
with DAG("t9k_e2e_forbidden", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="job", image="busybox", replicas=1, deferrable=True, timeout=600, log_events=False,
                       config_file=os.environ.get("T9K_E2E_LIMITED_KUBECONFIG"))  # fmt: skip

# startup_timeout well past the deferring process's exit: Airflow's scheduler fails a task whose
# trigger fires before the executor reported that exit (seen in CI when it took 5 s under load).
with DAG("t9k_e2e_startup", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="job", image="busybox", replicas=1, deferrable=True, timeout=600, startup_timeout=15,
                       container_resources=GPUS)  # fmt: skip

# The job stays Pending until the test labels a node for it, so the sensor surely defers first.
with DAG("t9k_e2e_sensor", start_date=START, schedule=None, catchup=False):
    submit = GenericJobOperator(task_id="submit", image="busybox", replicas=1, wait_for_completion=False,
                                node_selector={"t9k.test/e2e-sensor": "open"},
                                pod_annotations={"sim.t9k.test/duration": "120s"})  # fmt: skip
    started = T9kJobSensor(task_id="started", kind="{{ 'Generic' }}Job", target_phases="{{ 'Running' }}",
                           name="{{ ti.xcom_pull(task_ids='submit', key='t9k_job')['name'] }}", deferrable=True,
                           poke_interval=1, timeout=300)  # fmt: skip
    submit >> started
