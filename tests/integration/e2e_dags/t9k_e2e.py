"""DAGs for the end-to-end tests with a real scheduler and triggerer."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator, PyTorchTrainingJobOperator

START = datetime(2026, 1, 1)

with DAG("t9k_e2e_defer", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(
        task_id="job", image="busybox", replicas=2, pod_annotations={"sim.t9k.test/duration": "8s"}, deferrable=True
    )

with DAG("t9k_e2e_kill", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="job", image="busybox", replicas=1, deferrable=True)  # runs until killed

with DAG(
    "t9k_e2e_retry",
    start_date=START,
    schedule=None,
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
):
    GenericJobOperator(
        task_id="job", image="busybox", replicas=1, pod_annotations={"sim.t9k.test/duration": "25s"}, deferrable=False
    )

# A hyperparameter sweep: one job per map index, a literal file-like argument in the command
# (never read as a template file), each job's result back into its own map index's XCom. The
# jobs run 20 s: a trigger that fires within seconds of the deferral can resume the task before
# the scheduler has read the executor's event for the deferring run, and the scheduler then
# fails the resumed task ("finished with state success, but ... is running"; Airflow's race,
# seen here with four tasks deferring at once on two cores).
with DAG("t9k_e2e_sweep", start_date=START, schedule=None, catchup=False):
    GenericJobOperator.partial(
        task_id="job", image="busybox", replicas=1, deferrable=True, command=["python", "train.py", "--deepspeed_config=ds.json"],
    ).expand(pod_annotations=[{"sim.t9k.test/duration": "20s", "sim.t9k.test/message": f'{{"lr": {lr}}}'}
                              for lr in (0.1, 0.03, 0.01, 0.003)])  # fmt: skip

# Issue 23, point 2: an exit code the task calls permanent fails it at once; another is retried.
# Issue 28, point 3: exit 1 under a PyTorchTrainingJob's ExitCode restart policy (permanent inside
# the job) is retried too: Airflow-side permanence is the DAG author's (permanent_exit_codes).
# The jobs run 10 s: one that ends within seconds of its task deferring meets Airflow 3.3's stale
# defer-exit race (apache/airflow#72716, docs/airflow.md "Known limits"), which fails the task.
with DAG(
    "t9k_e2e_permanent",
    start_date=START,
    schedule=None,
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=1)},
):
    for task_id, code in (("permanent", "3"), ("retryable", "137")):
        GenericJobOperator(
            task_id=task_id,
            image="busybox",
            replicas=1,
            deferrable=True,
            permanent_exit_codes=[3],
            pod_annotations={"sim.t9k.test/duration": "10s", "sim.t9k.test/fail-pods": ".*", "sim.t9k.test/exit-code": code},
        )
    PyTorchTrainingJobOperator(
        task_id="exit_one",
        image="busybox",
        replicas=1,
        deferrable=True,
        pod_annotations={"sim.t9k.test/duration": "10s", "sim.t9k.test/fail-pods": ".*", "sim.t9k.test/exit-code": "1"},
    )
