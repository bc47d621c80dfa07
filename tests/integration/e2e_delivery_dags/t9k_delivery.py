"""DAGs for test_e2e_delivery.py: retries that must never train a job that succeeded again."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator
from airflow_t9k.operators.ti import TIJobOperator
from airflow_t9k.sensors.job import T9kJobSensor

START = datetime(2026, 1, 1)

# The workers' identity may create, read, watch and patch jobs but not delete them: the clean-up
# after success fails, which must not fail the task (and so must not make its retries train again).
with DAG("t9k_no_delete", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=False, retries=2,
                       retry_delay=timedelta(seconds=1), delete_on_finish="on_success",
                       config_file=os.environ.get("T9K_E2E_NO_DELETE_KUBECONFIG"),
                       pod_annotations={"sim.t9k.test/duration": "3s", "sim.t9k.test/message": '{"metric": 0.77}'})  # fmt: skip

# A job that ends a second after its task deferred: the trigger holds its event until
# [t9k] deferral_hold_seconds (10 s) after the deferral, past apache/airflow#72716. No log
# streaming: at a job's end the trigger reads the replicas' last lines from where an earlier
# triggerer left them, and on a triggerer's first trigger reading that takes ~8 s.
with DAG("t9k_hold", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True, log_events=False,
                       stream_logs=False, pod_annotations={"sim.t9k.test/duration": "1s"})  # fmt: skip

# A deferrable sensor on a job that has already ended reads it once on the worker and ends there.
with DAG("t9k_sensor_done", start_date=START, schedule=None, catchup=False):
    done = GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=False,
                              pod_annotations={"sim.t9k.test/duration": "1s"})  # fmt: skip
    wait = T9kJobSensor(task_id="wait", kind="GenericJob", deferrable=True, timeout=300,
                        name="{{ ti.xcom_pull(task_ids='train', key='t9k_job')['name'] }}")  # fmt: skip
    done >> wait

# Deferred while no triggerer runs; the test rewrites its trigger row as a newer worker would.
with DAG("t9k_upgrade", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True, log_events=False,
                       pod_annotations={"sim.t9k.test/duration": "5s"})  # fmt: skip

# A job whose log the test appends to around a restart of the triggerer: its pod runs until
# the test releases it (no `sim.t9k.test/duration`), however long the restart took.
with DAG("t9k_log_resume", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True, log_events=False)

# A job whose pod runs until the test releases it: its last lines are written, and it ends, while
# no triggerer runs.
with DAG("t9k_log_end_down", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True, log_events=False)

# One run id run three times (the run deleted and triggered again under the same id).
with DAG("t9k_same_run_id", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=False,
                       pod_annotations={"sim.t9k.test/duration": "2s"})  # fmt: skip

# A TI job whose pod runs until the test releases it: its XCom ti_state reads Running while it runs,
# written by the trigger in the triggerer (issue 47, item 5), with the task still deferred.
with DAG("t9k_ti_running", start_date=START, schedule=None, catchup=False):
    TIJobOperator(task_id="train", command="python train.py", runtime_images={"tf-1.7.0-py3": "busybox"},
                  deferrable=True, log_events=False, stream_logs=False)  # fmt: skip
