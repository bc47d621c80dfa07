"""DAGs for the triggerer fault test: T9K_CHAOS_DEFERRED deferrable tasks, each waiting on its
own one-replica GenericJob that runs T9K_CHAOS_JOB_SECONDS, then succeeds or fails."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

N = int(os.environ.get("T9K_CHAOS_DEFERRED", "10"))
RUNS_FOR = os.environ.get("T9K_CHAOS_JOB_SECONDS", "15")

for outcome, sim in [("success", {}), ("failed", {"sim.t9k.test/fail-pods": ".*"})]:
    with DAG(f"t9k_chaos_deferred_{outcome}", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
        for i in range(N):
            GenericJobOperator(task_id=f"job_{i:02d}", image="busybox", replicas=1, deferrable=True,
                               pod_annotations={"sim.t9k.test/duration": f"{RUNS_FOR}s", **sim})  # fmt: skip
