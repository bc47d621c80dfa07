"""TensorFlowTrainingJob: MultiWorkerMirroredStrategy over three workers (TF_CONFIG injected)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import TensorFlowTrainingJobOperator

with DAG("example_tensorflow", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    TensorFlowTrainingJobOperator(
        task_id="train",
        image="tensorflow/tensorflow:2.16.1-gpu",
        command=["python", "train.py"],
        replicas=3,
        machine_type="4U16G1P",
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
