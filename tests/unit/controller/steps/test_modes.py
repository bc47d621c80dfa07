"""Steps "scheduler" and "pause" alone."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.steps import modes
from tests.builders import generic, pod
from tests.unit.controller.steps.state import condition, kinds, state
from tests.unit.controller.test_plan_queueing import WL, wl

T9K = {"t9kScheduler": {"queue": "gpu", "priority": 3}}


@pytest.mark.parametrize(
    ("scheduler", "queueing", "noted", "queued", "events"),
    [
        (None, "off", None, False, []),
        (T9K, "off", ("False", "NotEnforced"), False, ["GangSchedulingNotEnforced", "QueueNotEnforced"]),
        (T9K, "kueue", None, True, []),  # Kueue enforces it
        # no LocalQueue "gpu"; neither gang nor queue enforced
        (T9K, "auto", ("False", "NotEnforced"), False, ["GangSchedulingNotEnforced", "QueueNotEnforced"]),
    ],
)
def test_scheduler(scheduler, queueing, noted, queued, events):
    job = generic(**({"scheduler": scheduler} if scheduler else {}))
    p = modes.scheduler(state(job, queueing=queueing))
    assert (condition(p, "QueueAdmission"), p.queued, [e.reason for e in p.events]) == (noted, queued, events)
    assert not p.ended


def test_scheduler_says_it_once():
    job = generic(scheduler=T9K)
    first = modes.scheduler(state(job))
    again = modes.scheduler(state(job, status=first.sb.new))
    assert [e.reason for e in first.events] == ["GangSchedulingNotEnforced", "QueueNotEnforced"]
    assert again.events == []


GANG_SERVED = {"gang_problem": None}


@pytest.mark.parametrize(
    ("scheduler", "queueing", "served", "effect", "gang", "queue"),
    [
        (None, "off", False, "Ignored", "not enforced: pods are placed one by one", None),
        (None, "off", True, "GangOnly", "enforced by kube-scheduler: PodGroup genericjob-job", None),
        (T9K, "off", True, "GangOnly", "enforced by kube-scheduler", "gpu: ignored, only the pod label"),
        (T9K, "kueue", True, "EnforcedByKueue", "enforced by Kueue", "gpu: enforced by Kueue"),
        (T9K, "off", False, "Ignored", "not enforced", "gpu: ignored"),
    ],
)  # fmt: skip
def test_status_says_what_each_scheduler_setting_does_here(scheduler, queueing, served, effect, gang, queue):
    from dataclasses import replace

    job = generic(**({"scheduler": scheduler} if scheduler else {}))
    p = state(job, queueing=queueing)
    if served:
        p.observed = replace(p.observed, **GANG_SERVED)
    said = modes.scheduler(p).sb.new["scheduling"]
    assert said["effect"] == effect
    assert said["gang"].startswith(gang), said
    if queue is None:
        assert "queue" not in said
    else:
        assert said["queue"].startswith(queue), said
    if scheduler and effect == "GangOnly":
        assert "GangSchedulingNotEnforced" not in [e.reason for e in p.events]


@pytest.mark.parametrize(
    ("paused", "queued", "actions"),
    [
        (False, False, None),
        (True, False, [("Delete", "Pod", "job-worker-0")]),  # the one being deleted already is left alone
        (True, True, [("Delete", "Pod", "job-worker-0"), ("Delete", "Workload", WL)]),  # the quota goes back
    ],
)
def test_pause(paused, queued, actions):
    job = generic(runMode={"pause": {"enabled": paused}})
    p = state(job, pod("job-worker-0"), pod("job-worker-1", deleting=True), wl(), queued=queued)
    p = modes.pause(p)
    if actions is None:
        assert not p.ended
        assert p.actions == []
        assert p.sb.new.get("phase") is None
        return
    assert p.ended
    assert kinds(p) == actions
    assert p.sb.new["phase"] == "Paused"
    assert condition(p, "Paused") == ("True", "Paused")
    assert condition(p, "Running") == ("False", "Paused")
    assert [e["phase"] for e in p.sb.new["tasks"][0]["status"]] == ["Running", "Deleted"]
