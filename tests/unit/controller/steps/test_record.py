"""Steps "failures", "tasks" and "wake" alone."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.steps import record
from tests.builders import generic, pod, pytorch
from tests.unit.controller.steps.state import condition, state

W0, W1 = "job-worker-0", "job-worker-1"


@pytest.mark.parametrize(
    ("pods", "old", "failure"),
    [
        ((pod(W0), pod(W1)), None, None),  # never said before, nothing to say
        ((pod(W0, "Failed", 1), pod(W1)), None, ("True", "ReplicaFailed")),
        ((pod(W0), pod(W1)), [{"type": "ReplicaFailure", "status": "True", "reason": "ReplicaFailed", "message": "m"}],
         ("False", "-")),
    ],
)  # fmt: skip
def test_failures(pods, old, failure):
    p = record.failures(state(generic(), *pods, status={"conditions": old} if old else None))
    assert condition(p, "ReplicaFailure") == failure


@pytest.mark.parametrize(
    ("job", "pods", "outcome", "phases", "backoff"),
    [
        (generic(), (pod(W0),), None, ["Running", "Pending"], None),
        (generic(), (pod(W0),), ("Failed", "Failed", "m"), ["Running", "Deleted"], None),  # ended: a missing pod is gone
        (pytorch("job", ("worker", 2), runPolicy={"backoffLimit": 3}), (pod(W0, restarts=2),), None,
         ["Running", "Pending"], 2),
    ],
)  # fmt: skip
def test_tasks(job, pods, outcome, phases, backoff):
    p = record.tasks(state(job, *pods, outcome=outcome))
    assert [e["phase"] for e in p.sb.new["tasks"][0]["status"]] == phases
    assert p.sb.new["aggregate"]["running"] == 1
    assert p.sb.new["observedGeneration"] == 1
    assert p.sb.new.get("backoffCount") == backoff


@pytest.mark.parametrize(("deadline_in", "outcome", "requeue"), [(None, None, None), (12.5, None, 12.5),
                                                                 (12.5, ("Failed", "X", "m"), None)])  # fmt: skip
def test_wake(deadline_in, outcome, requeue):
    assert record.wake(state(generic(), deadline_in=deadline_in, outcome=outcome)).requeue_after == requeue


@pytest.mark.parametrize(("deadline_in", "stall_in", "requeue"), [(None, 30.0, 30.0), (12.5, 30.0, 12.5), (60.0, 5.0, 5.0)])
def test_wake_at_the_first_of_the_deadline_and_a_stalls(deadline_in, stall_in, requeue):
    assert record.wake(state(generic(), deadline_in=deadline_in, stall_in=stall_in)).requeue_after == requeue
