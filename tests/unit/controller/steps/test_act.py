"""Steps "end", "group-restart" and "replicas" alone."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.reconcile.steps import act
from tests.builders import colossal, evidence, generic, pod, restart
from tests.unit.controller.steps.state import condition, kinds, state
from tests.unit.controller.test_plan_queueing import ADMISSION, ADMITTED, WL, queued, wl

W0, W1 = "job-worker-0", "job-worker-1"
EVICTED = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "message": "drained"}


def _evicted(name: str) -> dict:
    p = pod(name, "Failed", 137)
    p["status"]["conditions"] = [EVICTED]
    return p


@pytest.mark.parametrize(
    ("job", "outcome", "in_kueue", "actions", "root"),
    [
        (generic(), None, False, [], None),
        (generic(cleanUpPolicy="All"), ("Succeeded", "Succeeded", "done"), False,
         [("Delete", "Pod", W0), ("Delete", "Pod", W1)], None),
        (generic(cleanUpPolicy="None"), ("Failed", "Failed", "rule"), False, [], W1),
        (queued(), ("Failed", "DeadlineExceeded", "late"), True, [("ReplaceStatus", "Workload", WL)], W1),
    ],
)  # fmt: skip
def test_end(job, outcome, in_kueue, actions, root):
    objects = (pod(W0, "Succeeded", 0), pod(W1, "Failed", 2), evidence(job), wl(*ADMITTED, admission=ADMISSION))
    p = act.end_job(state(job, *objects, outcome=outcome, queued=in_kueue, queueing="kueue" if in_kueue else "off",
                          local_queues=("gpu",)))  # fmt: skip
    assert kinds(p) == actions
    assert not p.ended
    assert p.sb.new.get("phase") == (outcome[0] if outcome else None)
    assert (p.sb.new.get("rootCause") or {}).get("replica") == root
    if outcome:
        assert condition(p, "Failed") == ("True" if outcome[0] == "Failed" else "False", outcome[1])


@pytest.mark.parametrize(("outcome", "cause", "acts"), [(None, None, False), (("Failed", "X", "m"), "cai-worker-1", False),
                                                        (None, "cai-worker-1", True)])  # fmt: skip
def test_group_restart(outcome, cause, acts):
    objects = (pod("cai-launcher-0"), pod("cai-worker-0"), _evicted("cai-worker-1"), pod("cai-worker-2", deleting=True))
    p = state(colossal(workers=3), *objects, outcome=outcome)
    p.group_cause = next((s for s in p.states if s.slot.pod_name == cause), None)
    p = act.group_restart(p)
    if not acts:
        assert p.actions == []
        assert p.events == []
        assert "restartHistory" not in p.sb.new
        return
    assert kinds(p) == [("Delete", "Pod", "cai-launcher-0"), ("Delete", "Pod", "cai-worker-0"), ("Delete", "Pod", "cai-worker-1")]
    assert [e.reason for e in p.events] == ["GroupRestarting"]
    (entry,) = p.sb.new["restartHistory"]
    assert entry["counted"] is False
    assert entry["replica"] == "cai-worker-1 (whole group)"


def _rendered(job: dict, *names: str) -> dict:
    return {n: {"kind": "Pod", "metadata": {"name": n, "annotations": {}}, "spec": {}} for n in names}


@pytest.mark.parametrize(
    ("job", "pods", "rendered", "debug", "actions", "events", "restarts"),
    [
        # Missing pods are created, with the restart count they run under.
        (generic(), (), (W0, W1), False, [("Create", "Pod", W0), ("Create", "Pod", W1)], [], [0, 0]),
        # A failed replica whose policy allows it is deleted and counted; the job goes on.
        (restart(generic(), "OnFailure", 3), (pod(W0, "Failed", 1), pod(W1)), (), False,
         [("Delete", "Pod", W0)], ["ReplicaRestarting"], [1, 0]),
        (restart(generic(), "OnFailure", 3), (pod(W0, "Failed", 1), pod(W1)), (), True, [], [], [0, 0]),  # Debug: no restarts
        (generic(), (pod(W0, "Failed", 1), pod(W1)), (), False, [], [], [0, 0]),  # no policy: no restart
        # A disrupted replica is replaced without spending a restart.
        (generic(), (_evicted(W0), pod(W1)), (), False, [("Delete", "Pod", W0)], ["ReplicaDisrupted"], [0, 0]),
        # Pods of replicas no longer in the spec go.
        (generic("job", ("worker", 1)), (pod(W0), pod(W1)), (), False, [("Delete", "Pod", W1)], [], [0]),
    ],
)  # fmt: skip
def test_replicas(job, pods, rendered, debug, actions, events, restarts):
    p = act.replicas(state(job, *pods, rendered=_rendered(job, *rendered), debug=debug))
    assert kinds(p) == actions
    assert [e.reason for e in p.events] == events
    assert [s.restarts for s in p.states] == restarts
    created = [a.manifest for a in p.actions if type(a).__name__ == "Create"]
    assert all(m["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "0" for m in created)
    assert p.sb.new["phase"] in ("Pending", "Running")  # the job's progress is said


def test_replicas_finish_a_restart_already_decided_without_counting_it_again():
    status = {"tasks": [{"type": "worker", "status": [{"name": W0, "restartCount": 1}]}]}
    p = act.replicas(state(restart(generic(), "OnFailure", 3), pod(W0, "Failed", 1), pod(W1), status=status))
    assert kinds(p) == [("Delete", "Pod", W0)]
    assert p.events == []
    assert p.states[0].restarts == 1


def test_replicas_spend_a_shared_budget():
    job = restart(generic(), "OnFailure", 3)
    p = act.replicas(state(job, pod(W0, "Failed", 1), pod(W1, "Failed", 1), budget=[1]))
    assert kinds(p) == [("Delete", "Pod", W0)]
    assert p.budget == [0]


@pytest.mark.parametrize(("outcome", "cause"), [(("Failed", "X", "m"), None), (None, "x")])
def test_replicas_do_nothing_when_the_job_ends_or_restarts_as_a_group(outcome, cause):
    p = state(generic(), rendered=_rendered(generic(), W0, W1), outcome=outcome)
    p.group_cause = copy.copy(p.states[0]) if cause else None
    assert act.replicas(p).actions == []
