"""Steps "deleting", "template", "shape", "observe" alone."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.actions import Delete, WriteSpec
from airflow_t9k.controller.reconcile.observe import Observed
from airflow_t9k.controller.reconcile.steps import admit
from airflow_t9k.kinds.templates import apply_template, record_of
from tests.builders import NOW, generic, pod, service
from tests.unit.controller.steps.state import condition, state
from tests.unit.controller.test_plan_templates import TEMPLATE
from tests.unit.controller.test_plan_templates import job as templated


@pytest.mark.parametrize(("deleting", "ended"), [(True, True), (False, False)])
def test_deleting(deleting, ended):
    job = generic()
    if deleting:
        job["metadata"]["deletionTimestamp"] = "2026-11-25T11:00:00Z"
    p = admit.deleting(state(job, pod("job-worker-0")))
    assert (p.ended, p.keep_status, p.actions) == (ended, ended, [])


def test_template_merged_first_writes_only_the_spec():
    p = admit.resolve_template(state(templated(), observed=Observed(template=TEMPLATE)))
    assert p.ended
    assert p.keep_status
    assert [type(a) for a in p.actions] == [WriteSpec]
    assert [e.reason for e in p.events] == ["TemplateResolved"]


def test_template_missing_waits_with_a_condition_and_a_requeue():
    p = admit.resolve_template(state(templated()))
    assert p.ended
    assert not p.keep_status
    assert p.actions == []
    assert condition(p, "TemplateResolved") == ("False", "TemplateNotFound")
    assert p.requeue_after == 30


def test_template_already_merged_is_noted_and_the_pass_goes_on():
    merged = apply_template(templated(), TEMPLATE)
    merged["status"] = {"template": record_of(TEMPLATE)}  # the controller's record of the merge (issue 29)
    p = admit.resolve_template(state(merged))
    assert not p.ended
    assert condition(p, "TemplateResolved") == ("True", "Resolved")


def _bad() -> dict:
    return generic(failureRules=[{"chief": [0]}])  # no such replica type


@pytest.mark.parametrize(
    ("job", "old", "ended", "keep", "phase", "deletes"),
    [
        (generic(), None, False, False, None, []),
        (_bad(), None, True, False, "Failed", ["job-worker-0", "job-worker-0"]),  # what it made goes
        # Already failed for it: whatever is left goes, the status stays.
        (_bad(), {"phase": "Failed", "conditions": [{"type": "Failed", "status": "True", "reason": "InvalidSpec"}]},
         True, True, "Failed", ["job-worker-0", "job-worker-0"]),
        (_bad(), {"phase": "Succeeded"}, True, True, "Succeeded", []),  # a finished job's phase never changes
    ],
)  # fmt: skip
def test_shape(job, old, ended, keep, phase, deletes):
    p = state(generic(), pod("job-worker-0"), service("job-worker-0"), status=old, slots=[], states=[])
    p.job = {**job, "status": p.job.get("status")}
    p = admit.shape(p)
    assert (p.ended, p.keep_status, p.sb.new.get("phase")) == (ended, keep, phase)
    assert [a.name for a in p.actions if isinstance(a, Delete)] == deletes
    if not ended:
        assert [s.pod_name for s in p.slots] == ["job-worker-0", "job-worker-1"]
    if ended and not keep:
        assert condition(p, "Failed") == ("True", "InvalidSpec")
        assert p.events == []


@pytest.mark.parametrize(
    ("pods", "recorded", "restarts", "restart_recorded"),
    [
        ((), 0, 0, False),
        ((pod("job-worker-0", restarts=1),), 0, 1, False),  # the pod's own count
        ((pod("job-worker-0", "Failed", 1, restarts=1),), 2, 2, True),  # restart decided, pod not yet deleted
        ((pod("job-worker-0", restarts=2),), 2, 2, False),  # the restarted pod
    ],
)
def test_observe(pods, recorded, restarts, restart_recorded):
    status = {"tasks": [{"type": "worker", "status": [{"name": "job-worker-0", "restartCount": recorded}]}]}
    p = state(generic("job", ("worker", 1)), *pods, status=status, states=[])
    p = admit.observe_replicas(p)
    (s,) = p.states
    assert (s.pod is not None, s.restarts, s.restart_recorded) == (bool(pods), restarts, restart_recorded)
    assert not p.ended
    assert p.sb.now == NOW


def _c(type_: str, status: str, reason: str) -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": "m", "lastTransitionTime": "2026-11-25T10:00:00Z"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ([_c("Running", "True", "-")], [_c("Running", "True", "-")]),
        # Renamed in place, its time kept; the old reason word becomes the seeds' "-".
        ([_c("Initialized", "True", "Initialized"), _c("Running", "True", "-")],
         [_c("Initializing", "True", "-"), _c("Running", "True", "-")]),
        ([_c("Initialized", "False", "Creating")], [_c("Initializing", "False", "Creating")]),
        # Both (a pass of each version): the old one goes.
        ([_c("Initialized", "True", "Initialized"), _c("Initializing", "True", "-")], [_c("Initializing", "True", "-")]),
    ],
)  # fmt: skip
def test_legacy(old, new):
    p = admit.legacy(state(generic(), status={"phase": "Running", "conditions": old}))
    assert p.sb.new["conditions"] == new
    assert not p.ended
