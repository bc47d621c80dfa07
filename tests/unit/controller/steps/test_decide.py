"""Steps "start", "deadline" and "verdict" alone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_t9k.controller.reconcile.steps import decide
from tests.builders import NOW, colossal, generic, pod, pytorch, restart
from tests.unit.controller.steps.state import state

EVICTED = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}


@pytest.mark.parametrize(
    ("job", "pods", "old_start", "debug", "budget", "start"),
    [
        (generic(), (), None, False, None, "2026-11-25T12:00:00Z"),
        (generic(runMode={"debug": {"enabled": True}}), (), None, True, None, "2026-11-25T12:00:00Z"),
        # A shared budget (backoffLimit) less what the replicas have spent; startTime is set once.
        (pytorch(runPolicy={"backoffLimit": 4}), (pod("pt-worker-0", restarts=1), pod("pt-worker-1", restarts=2)),
         "2026-11-25T11:00:00Z", False, [1], "2026-11-25T11:00:00Z"),
    ],
)  # fmt: skip
def test_start(job, pods, old_start, debug, budget, start):
    p = decide.start(state(job, *pods, status={"startTime": old_start} if old_start else None))
    assert (p.debug, p.budget, p.sb.new["startTime"]) == (debug, budget, start)


ADMITTED_FALSE = {"type": "Admitted", "status": "False", "reason": "Evicted", "message": "m"}
ADMITTED_TRUE = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "m"}
STARTED = "2026-11-25T11:00:00Z"


@pytest.mark.parametrize(
    ("old", "queued", "resume"),
    [
        ({"phase": "Running", "startTime": STARTED}, False, None),
        ({"phase": "Paused", "startTime": STARTED}, False, "2026-11-25T12:00:00Z"),  # Pause mode turned off
        ({"phase": "Paused"}, False, None),  # paused before it ever started: no resume of a clock
        ({"phase": "Pending", "startTime": STARTED, "conditions": [ADMITTED_FALSE]}, True, "2026-11-25T12:00:00Z"),
        ({"phase": "Running", "startTime": STARTED, "conditions": [ADMITTED_TRUE]}, True, None),
        ({"phase": "Pending", "conditions": [ADMITTED_FALSE]}, True, None),  # the first admission
        ({"phase": "Running", "startTime": STARTED, "lastResumeTime": "2026-11-25T11:30:00Z"}, False,
         "2026-11-25T11:30:00Z"),  # kept
    ],
)  # fmt: skip
def test_start_records_a_resume(old, queued, resume):
    p = decide.start(state(generic(), status=old, queued=queued))
    assert p.sb.new.get("lastResumeTime") == resume
    assert p.sb.new["startTime"] == old.get("startTime", "2026-11-25T12:00:00Z")


@pytest.mark.parametrize(
    ("resumed_ago", "outcome", "left"), [(None, "DeadlineExceeded", 0.0), (10, None, 50.0), (60, "DeadlineExceeded", 0.0)]
)
def test_deadline_counts_from_the_last_resume(resumed_ago, outcome, left):
    p = state(pytorch(runPolicy={"activeDeadlineSeconds": 60}), now=NOW + timedelta(seconds=100))
    p.sb.new["startTime"] = "2026-11-25T12:00:00Z"
    if resumed_ago is not None:
        p.sb.new["lastResumeTime"] = (NOW + timedelta(seconds=100 - resumed_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    p = decide.deadline(p)
    assert (p.outcome[1] if p.outcome else None, p.deadline_in) == (outcome, left)


@pytest.mark.parametrize(
    ("limit", "ran", "debug", "outcome", "left"),
    [
        (None, 100, False, None, None),
        (60, 10, False, None, 50.0),
        (60, 60, False, "DeadlineExceeded", 0.0),
        (60, 90, True, None, 0.0),  # Debug mode never ends the job
    ],
)
def test_deadline(limit, ran, debug, outcome, left):
    job = pytorch(runPolicy={"activeDeadlineSeconds": limit} if limit else {})
    p = state(job, now=NOW + timedelta(seconds=ran), debug=debug)
    p.sb.new["startTime"] = "2026-11-25T12:00:00Z"
    p = decide.deadline(p)
    assert (p.outcome[1] if p.outcome else None, p.deadline_in) == (outcome, left)


W0, W1 = "job-worker-0", "job-worker-1"


@pytest.mark.parametrize(
    ("job", "pods", "debug", "outcome"),
    [
        (generic(), (pod(W0), pod(W1)), False, None),
        (generic(), (pod(W0, "Succeeded", 0), pod(W1, "Succeeded", 0)), False, ("Succeeded", "Succeeded")),
        (generic(), (pod(W0, "Failed", 1), pod(W1)), False, ("Failed", "Failed")),  # failure rules: any fails for good
        (restart(generic(), "OnFailure", 2), (pod(W0, "Failed", 1), pod(W1)), False, None),  # it will be restarted
        (generic(), (pod(W0, "Failed", 1), pod(W1)), True, None),  # Debug mode: no verdict
        (generic(successRules=[{"worker": [0]}], failureRules=[{"worker": [1]}]),
         (pod(W0, "Succeeded", 0), pod(W1, "Failed", 1)), False, ("Failed", "Failed")),  # failure wins
        (generic(successRules=[{"worker": [0, 1]}], failureRules=[{"worker": [0, 1]}]),
         (pod(W0, "Succeeded", 0), pod(W1, "Failed", 1)), False, ("Failed", "NoRuleSatisfied")),
    ],
)  # fmt: skip
def test_verdict(job, pods, debug, outcome):
    p = decide.verdict(state(job, *pods, debug=debug))
    assert (p.outcome[:2] if p.outcome else None) == outcome
    assert p.group_cause is None


def test_verdict_a_disrupted_replica_of_a_fixed_world_launch_restarts_the_group_instead():
    evicted = pod("cai-worker-1", "Failed", 137)
    evicted["status"]["conditions"] = [EVICTED]
    p = decide.verdict(state(colossal(), pod("cai-launcher-0", "Failed", 1), pod("cai-worker-0"), evicted))
    assert p.outcome is None
    assert p.group_cause is not None
    assert p.group_cause.slot.pod_name == "cai-worker-1"


def test_verdict_keeps_an_earlier_outcome():
    p = decide.verdict(state(generic(), pod(W0, "Succeeded", 0), pod(W1, "Succeeded", 0), outcome=("Failed", "X", "m")))
    assert p.outcome == ("Failed", "X", "m")


@pytest.mark.parametrize(("rule", "text"), [({"worker": [0]}, '{ "worker": [0] }'),
                                            ({"a": [0, 1], "b": [2]}, '{ "a": [0, 1], "b": [2] }')])  # fmt: skip
def test_rules_print_as_seed_001_does(rule, text):
    assert decide.fmt(rule) == text
