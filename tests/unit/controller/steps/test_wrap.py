"""Steps "seal", "usage", "progress" and "public" alone."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.actions import Delete, Emit, Plan
from airflow_t9k.controller.reconcile.observe import Observed
from airflow_t9k.controller.reconcile.steps import wrap
from tests.builders import NOW, generic
from tests.unit.controller.steps.state import state
from tests.unit.controller.test_plan_ascend import ascend


@pytest.mark.parametrize(
    ("old", "new", "keep", "events"),
    [
        ({"phase": "Running"}, "Running", False, ["E"]),
        ({"phase": "Running"}, "Failed", False, ["Failed", "E"]),  # a phase change is announced first
        ({"phase": "Running"}, "Failed", True, ["E"]),  # the status found is written: nothing changes
    ],
)
def test_seal(old, new, keep, events):
    p = state(generic(), status=old, actions=[Delete("Pod", "x")], events=[Emit("Normal", "E", "m")], requeue_after=3.0)
    p.sb.set_phase(new)
    p.keep_status = keep
    result = wrap.seal(p).result
    assert [e.reason for e in result.events] == events
    assert result.actions == (Delete("Pod", "x"),)
    assert result.requeue_after == 3.0
    assert result.status["phase"] == (old["phase"] if keep else new)


RUNNING = {"running": {"startedAt": "2026-11-25T11:00:00Z"}}
RUN = {"metadata": {"name": "job-worker-0", "uid": "u0"},
       "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 2}}}]},
       "status": {"phase": "Running", "containerStatuses": [{"name": "main", "state": RUNNING}]}}  # fmt: skip


@pytest.mark.parametrize(("deleted", "accelerators"), [(False, {}), (True, {"nvidia.com/gpu": 7200})])
def test_usage(deleted, accelerators):
    p = state(generic(), {**RUN, "kind": "Pod"}, status={"phase": "Running"})
    p.result = Plan((Delete("Pod", "job-worker-0", "u0"),) if deleted else (), {"phase": "Running"})
    usage = wrap.usage(p).result.status["usage"]
    assert usage["accelerators"] == accelerators
    assert ("u0" in usage["open"]) is not deleted


def test_progress():
    report = {"replica": "job-worker-0", "time": "2026-11-25T11:59:59Z", "values": {"step": 5, "total_steps": 10}}
    p = state(generic(), observed=Observed(report=report))
    p.result = Plan((), {"phase": "Running"})
    got = wrap.progress(p).result.status["progress"]
    assert (got["step"], got["percent"], got["summary"]) == (5, 50.0, "50% 5/10")


@pytest.mark.parametrize(("job", "translated"), [(generic(), False), (ascend(), True)])
def test_public(job, translated):
    p = state(job)
    inner = Plan((), {"phase": "Running", "conditions": [{"type": "Running", "status": "True", "reason": "Running",
                                                          "message": "m", "lastTransitionTime": "t"}]})  # fmt: skip
    p.result = inner
    out = wrap.public(p).result
    assert (out is not inner) is translated
    if translated:  # Kubeflow's shape: no T9k phase
        assert "phase" not in out.status
        assert "replicaStatuses" in out.status


def test_a_step_after_seal_needs_the_sealed_plan():
    with pytest.raises(RuntimeError):
        wrap.usage(state(generic()))
    assert NOW  # the builders' clock
