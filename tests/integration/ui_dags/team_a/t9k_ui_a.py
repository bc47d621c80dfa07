"""DAGs of team A for the UI tests (tests/integration/test_ui.py): a three-replica job that
runs for a while, and one that runs until paused, resumed and deleted from the UI."""

from __future__ import annotations

from datetime import datetime

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
