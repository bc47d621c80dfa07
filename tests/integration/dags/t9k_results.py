"""Each kind's deciding replica hands its termination message to the next task through XCom."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from airflow_t9k.operators.kinds import (
    ColossalAIJobOperator,
    DeepSpeedJobOperator,
    GenericJobOperator,
    MPIJobOperator,
    PyTorchTrainingJobOperator,
)


def sim(message: str) -> dict[str, str]:
    """kwok: run 2 s, then end with this termination message (what the script would write)."""
    return {"sim.t9k.test/duration": "2s", "sim.t9k.test/message": message}


with DAG("t9k_results", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    common: dict[str, Any] = {"image": "img", "command": ["python", "train.py"], "deferrable": True}
    jobs = {
        "pytorch": PyTorchTrainingJobOperator(task_id="pytorch", replicas=2, pod_annotations=sim('{"metric": 0.93}'), **common),
        "text": GenericJobOperator(task_id="text", replicas=1, pod_annotations=sim("model at s3://models/run-7"), **common),
        "colossalai": ColossalAIJobOperator(
            task_id="colossalai", replicas=2, pod_annotations=sim('{"from": "launcher"}'), **common
        ),
        "mpi": MPIJobOperator(task_id="mpi", replicas=2, pod_annotations=sim('{"from": "mpi launcher"}'), **common),
        "deepspeed": DeepSpeedJobOperator(task_id="deepspeed", replicas=2, pod_annotations=sim('{"from": "worker 0"}'), **common),
        "sync": GenericJobOperator(
            task_id="sync", replicas=1, pod_annotations=sim("[1, 2, 3]"), **{**common, "deferrable": False}
        ),
    }
    expected = {"pytorch": {"metric": 0.93}, "text": "model at s3://models/run-7", "colossalai": {"from": "launcher"},
                "mpi": {"from": "mpi launcher"}, "deepspeed": {"from": "worker 0"}, "sync": [1, 2, 3]}  # fmt: skip

    @task
    def check(results: dict[str, Any]) -> str:
        wrong = {k: v["result"] for k, v in results.items() if v["result"] != expected[k]}
        if wrong:
            raise ValueError(f"unexpected results: {wrong}")
        return f"every result arrived: {sorted(results)}"

    check({k: op.output for k, op in jobs.items()})
