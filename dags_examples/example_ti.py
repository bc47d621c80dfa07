"""A TI-style job (seed 004): three GPU workers on the native TensorFlow runtime."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.ti import TIJobOperator

with DAG("example_ti", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example", "ti"]):
    TIJobOperator(
        task_id="benchmark",
        command=["python", "/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py", "--model", "resnet50", "--batch_size", "32"],
        runtime_version="tf-1.6.0-gpu-py3",
        master_type="1U2G1P",
        worker_type="0U0G2P",
        worker_count=3,
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
