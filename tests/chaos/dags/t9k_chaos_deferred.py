"""DAGs for the triggerer fault test: T9K_CHAOS_DEFERRED deferrable tasks, each waiting on its
own one-replica GenericJob. Its pod has no `sim.t9k.test/duration`, so kwok keeps it Running
until the test gives it one (tests/chaos/test_triggerer_kill.py, `_release`); it then succeeds,
or fails where `sim.t9k.test/fail-pods` says so."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

N = int(os.environ.get("T9K_CHAOS_DEFERRED", "10"))

for outcome, sim in [("success", {}), ("failed", {"sim.t9k.test/fail-pods": ".*"})]:
    with DAG(f"t9k_chaos_deferred_{outcome}", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
        for i in range(N):
            GenericJobOperator(task_id=f"job_{i:02d}", image="busybox", replicas=1, deferrable=True, pod_annotations=sim)
