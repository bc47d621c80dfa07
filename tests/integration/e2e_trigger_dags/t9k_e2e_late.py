"""DAG for test_e2e_trigger.py (the late trigger): three deferred tasks whose deadline passes while the
triggerer is stopped. Their jobs succeed, fail, or still run when it starts again: the pods
have no `sim.t9k.test/duration`, so they run until the test releases two of them."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import GenericJobOperator

TIMEOUT = int(os.environ.get("T9K_LATE_TIMEOUT", "60"))  # the tasks' deadline, from their submission
FAIL = {"sim.t9k.test/fail-pods": ".*", "sim.t9k.test/exit-code": "3"}

with DAG("t9k_e2e_late", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):
    for task_id, annotations in [("succeeds", {}), ("fails", FAIL), ("runs", {})]:
        GenericJobOperator(task_id=task_id, image="busybox", replicas=1, deferrable=True, timeout=TIMEOUT, log_events=False,
                           pod_annotations=annotations)  # fmt: skip
