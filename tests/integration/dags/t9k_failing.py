"""A job whose deciding replica fails: the task must fail and say why."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

with DAG("t9k_failing", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    GenericJobOperator(
        task_id="doomed",
        image="busybox",
        replicas=2,
        pod_annotations={"sim.t9k.test/duration": "1s", "sim.t9k.test/fail-pods": "-worker-1$", "sim.t9k.test/exit-code": "137",
                         "sim.t9k.test/reason": "OOMKilled",
                         "sim.t9k.test/message": "Traceback (most recent call last): torch.cuda.OutOfMemoryError: CUDA out of "
                                                 "memory"},
        spec={"successRules": [{"worker": [0, 1]}], "failureRules": [{"worker": [1]}]},
        deferrable=True,
    )  # fmt: skip
