"""DAGs of team A for the UI tests (tests/integration/test_ui.py): a three-replica job that
runs for a while, one that runs until paused, resumed and deleted from the UI, an Elastic
job to scale, one that fails and is cleaned up (its kept evidence), and one whose replica
reports progress (the test "prints" its T9K_PROGRESS lines into kwok's pod log)."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_t9k.operators.job import T9kJobOperator
from airflow_t9k.operators.kinds import GenericJobOperator

START = datetime(2026, 1, 1)

with DAG("t9k_ui_a", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=3, pod_annotations={"sim.t9k.test/duration": "18s"},
                       deferrable=True)  # fmt: skip

with DAG("t9k_ui_pause", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True)  # runs until deleted

# An Elastic PyTorchTrainingJob for the Scale test: submitted by a real task, since the UI acts
# only on the job a task recorded (XCom t9k_job), never on one found by its annotations.
with DAG("t9k_ui_elastic", start_date=START, schedule=None, catchup=False):
    T9kJobOperator(task_id="train", deferrable=True, job={
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": "el-ui"},
        "spec": {"torchrunConfig": {"enabled": True, "procPerNode": "1", "maxRestarts": 5},
                 "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3, "expectedReplicas": 2},
                 "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": "ExitCode",
                                   "template": {"spec": {"containers": [{"name": "pytorch", "image": "pytorch:2",
                                                                         "command": ["python"], "args": ["train.py"]}]}}}]},
    })  # fmt: skip

# A job that fails and is cleaned up (cleanUpPolicy All): its worker-0 exits 3 with a termination
# message; the controller keeps its evidence in <job>-evidence before the pods go, and the tab
# shows it (issue 23, point 3).
FAILING = {"sim.t9k.test/duration": "2s", "sim.t9k.test/fail-pods": "-worker-0$", "sim.t9k.test/exit-code": "3",
           "sim.t9k.test/message": "loss is nan at step 812"}  # fmt: skip
with DAG("t9k_ui_evidence", start_date=START, schedule=None, catchup=False):
    T9kJobOperator(task_id="train", deferrable=True, job={
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "ev-ui"},
        "spec": {"cleanUpPolicy": "All", "failureRules": [{"worker": [0]}], "successRules": [{"worker": [0, 1]}],
                 "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "Never"},
                                   "template": {"metadata": {"annotations": FAILING},
                                                "spec": {"containers": [{"name": "main", "image": "busybox",
                                                                         "command": ["train"]}]}}}]},
    })  # fmt: skip

# Two tries (issue 23: the tab shows earlier attempts): try 1's worker-0 exits 3 and the job is
# cleaned up with its evidence kept; the retry runs the job anew as <name>-t2, which succeeds.
RETRYING = {**FAILING, "sim.t9k.test/fail-pods": "{{ '-worker-0$' if ti.try_number == 1 else '^no-such-pod$' }}"}
with DAG("t9k_ui_retry", start_date=START, schedule=None, catchup=False):
    # Waits on the worker: this stack's triggerer serves no team, so a team DAG's deferred task never resumes.
    T9kJobOperator(task_id="train", deferrable=False, retries=1, retry_delay=timedelta(seconds=1), job={
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "retry-ui"},
        "spec": {"cleanUpPolicy": "All", "failureRules": [{"worker": [0]}], "successRules": [{"worker": [0, 1]}],
                 "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "Never"},
                                   "template": {"metadata": {"annotations": RETRYING},
                                                "spec": {"containers": [{"name": "main", "image": "busybox",
                                                                         "command": ["train"]}]}}}]},
    })  # fmt: skip

# Live progress (docs/progress.md): the tab draws the metrics; TensorBoard/MLflow extra links.
# It waits on the worker, so that the test sees it end (this multi-team stack's triggerer takes
# no team's triggers; the deferred wait's progress lines: tests/integration/test_progress.py).
with DAG("t9k_ui_progress", start_date=START, schedule=None, catchup=False):
    # No duration: the replica runs until the test ends it, after its last progress report.
    GenericJobOperator(task_id="train", image="busybox", replicas=1,
                       deferrable=False, tensorboard_url="http://tensorboard.example/?run={{ run_id }}&job={name}")  # fmt: skip

with DAG("t9k_ui_overrun", start_date=START, schedule=None, catchup=False):
    # The test reports a step a second of 100,000: an ETA of a day against a 30-minute execution_timeout.
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=False,
                       execution_timeout=timedelta(minutes=30))  # fmt: skip

with DAG("t9k_ui_history", start_date=START, schedule=None, catchup=False, params={"acc": 0.5}):
    # Each run's result is the accuracy the test passes; a run 0.02 behind the best earlier one is flagged.
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=False, regression_threshold={"acc": 0.02},
                       pod_annotations={"sim.t9k.test/duration": "1s",
                                        "sim.t9k.test/message": '{"acc": {{ params.acc }}, "f1": 0.5}'})  # fmt: skip
