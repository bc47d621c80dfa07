"""Step "expire" alone, and how "wake" and "seal" carry its timer into the plan."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.actions import DeleteJob
from airflow_t9k.controller.reconcile.steps import expire, record, wrap
from tests.builders import generic, pytorch, ts
from tests.unit.controller.steps.state import state


def ended(phase: str, ago: float | None) -> dict:
    c = {"type": "Completed" if phase == "Succeeded" else "Failed", "status": "True", "reason": phase, "message": "m"}
    if ago is not None:
        c["lastTransitionTime"] = ts(-ago)
    return {"phase": phase, "conditions": [c]}


@pytest.mark.parametrize(
    ("job", "status", "ended_", "expire_in", "deleted"),
    [
        (generic(ttlSecondsAfterFinished=30), {"phase": "Running"}, False, None, False),  # running: untouched
        (generic(ttlSecondsAfterFinished=30), {"phase": "Paused"}, False, None, False),
        (generic(), ended("Succeeded", 100), False, None, False),  # no TTL
        (generic(ttlSecondsAfterFinished=30), ended("Succeeded", 10), False, 20.0, False),
        (generic(ttlSecondsAfterFinished=30), ended("Failed", 30), True, None, True),
        (generic(ttlSecondsAfterFinished=0), ended("Succeeded", 0), True, None, True),
        (generic(ttlSecondsAfterFinished=0), ended("Succeeded", None), False, None, False),  # no end time on record
        (pytorch("job", runPolicy={"ttlSecondsAfterFinished": 5}), ended("Succeeded", 1), False, 4.0, False),
        (pytorch("job", runPolicy={"ttlSecondsAfterFinished": 5}), ended("Failed", 6), True, None, True),
        # runPolicy.ttlSecondsAfterFinished on a GenericJob is not its field (spec.ttlSecondsAfterFinished is).
        (generic(runPolicy={"ttlSecondsAfterFinished": 0}), ended("Succeeded", 100), False, None, False),
    ],
    ids=["running", "paused", "no-ttl", "before", "reached", "zero", "no-end-time", "runpolicy-before", "runpolicy-reached",
         "generic-runpolicy"],
)  # fmt: skip
def test_expire(job, status, ended_, expire_in, deleted):
    p = expire.expire(state(job, status=status))
    assert p.ended is ended_
    assert p.expire_in == expire_in
    assert p.actions == ([DeleteJob("uid-job")] if deleted else [])
    if deleted:
        assert p.keep_status  # nothing written
        assert [e.reason for e in p.events] == [expire.REASON]


@pytest.mark.parametrize(
    ("job", "outcome", "expire_in"),
    [
        (generic(ttlSecondsAfterFinished=30), ("Succeeded", "Succeeded", "m"), 30.0),  # ends now: woken at the TTL
        (generic(ttlSecondsAfterFinished=30), None, None),  # goes on
        (generic(), ("Failed", "Failed", "m"), None),  # no TTL
    ],
)
def test_wake_at_the_ttl_of_a_job_that_ends_now(job, outcome, expire_in):
    assert record.wake(state(job, outcome=outcome)).expire_in == expire_in


@pytest.mark.parametrize(
    ("requeue_after", "expire_in", "requeue"),
    [(None, None, None), (None, 7.0, 7.0), (3.0, 7.0, 3.0), (9.0, 7.0, 7.0), (3.0, None, 3.0)],
)
@pytest.mark.parametrize("keep_status", [False, True])
def test_seal_wakes_at_the_sooner_timer(requeue_after, expire_in, requeue, keep_status):
    p = state(generic(), requeue_after=requeue_after, expire_in=expire_in, keep_status=keep_status)
    result = wrap.seal(p).result
    assert result is not None
    assert result.requeue_after == requeue
