"""Which status changes may wait to be written together (the controller's --coalesce-status)."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile import Create, Emit, Plan
from airflow_t9k.controller.runner import detail_only

RUNNING = {"type": "Running", "status": "True", "reason": "Running"}
OLD = {"phase": "Running", "conditions": [RUNNING], "aggregate": {"running": 3, "succeeded": 0},
       "tasks": [{"type": "worker", "replicas": [{"name": "w-0", "phase": "Running"}]}]}  # fmt: skip


def status(**changes):
    return {**OLD, **changes}


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-1"}}

CASES = [
    # (what, old status, plan, may wait)
    ("a pod ended, counts moved, nothing to do", OLD, Plan(status=status(aggregate={"running": 2, "succeeded": 1})), True),
    ("replica detail only", OLD, Plan(status=status(tasks=[{"type": "worker", "replicas": []}])), True),
    ("a condition that is not the phase (Initialized)", OLD,
     Plan(status=status(conditions=[RUNNING, {"type": "Initialized", "status": "True"}])), True),
    ("a new phase", OLD, Plan(status=status(phase="Succeeded")), False),
    ("a new phase with the same conditions", {**OLD, "phase": "Pending"}, Plan(status=OLD), False),
    ("the pass acts (status first)", OLD, Plan(actions=(Create(POD),), status=status(aggregate={})), False),
    ("the pass reports an event", OLD, Plan(status=status(aggregate={}), events=(Emit("Normal", "X", "y"),)), False),
    ("the first status of a job", {}, Plan(status={"phase": "Pending"}), False),
    ("nothing changed", OLD, Plan(status=OLD), False),
    ("a kind without phase, counts moved", {"conditions": [RUNNING], "replicaStatuses": {"Worker": {"active": 1}}},
     Plan(status={"conditions": [RUNNING], "replicaStatuses": {"Worker": {"active": 2}}}), True),
    ("a kind without phase: its Succeeded condition is its phase", {"conditions": [RUNNING]},
     Plan(status={"conditions": [{**RUNNING, "status": "False"}, {"type": "Succeeded", "status": "True"}]}), False),
    ("a kind without phase: Failed", {"conditions": [RUNNING]},
     Plan(status={"conditions": [RUNNING, {"type": "Failed", "status": "True"}]}), False),
]  # fmt: skip


@pytest.mark.parametrize(("what", "old", "result", "expected"), CASES, ids=[c[0] for c in CASES])
def test_only_replica_detail_with_nothing_to_do_may_wait(what, old, result, expected):
    assert detail_only(old, result) is expected
