"""BeamJob: a Beam wordcount on a Flink cluster with two TaskManagers."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import BeamJobOperator

with DAG("example_beam", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    BeamJobOperator(
        task_id="wordcount",
        image="apache/beam_python3.8_sdk:2.22.0",
        flink_image="t9kpublic/flink:1.10.1",
        command=["python3", "-m", "apache_beam.examples.wordcount", "--runner=FlinkRunner", "--output=/tmp/counts"],
        replicas=2,
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
