"""GenericJob: two workers; worker 0 decides (seed 001's rules)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

with DAG("example_genericjob", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    GenericJobOperator(
        task_id="generic",
        image="busybox:1.36",
        command=["sh", "-c", "echo worker $(rank) of $(replicas[worker])"],
        replicas=2,
        machine_type="1U2G0P",
        spec={"successRules": [{"worker": [0]}], "failureRules": [{"worker": [0]}], "cleanUpPolicy": "Unfinished"},
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
