"""Step "finished" alone: a finished job is only cleaned up."""

from __future__ import annotations

import pytest

from tests.builders import evidence, generic, pod, service
from tests.unit.controller.steps.state import kinds, state

DONE = {"phase": "Succeeded", "conditions": [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                              "message": "done", "lastTransitionTime": "2026-11-25T11:59:00Z"}]}  # fmt: skip
INVALID = {"phase": "Failed", "conditions": [{"type": "Failed", "status": "True", "reason": "InvalidSpec", "message": "bad"}]}
OBJECTS = (pod("job-worker-0"), pod("job-worker-1", "Succeeded", 0), service("job-worker-0"))


@pytest.mark.parametrize(
    ("policy", "status", "kept", "actions"),
    [
        (None, {"phase": "Running"}, True, None),  # not finished: the pass goes on
        (
            "All",
            DONE,
            True,
            [("Delete", "Pod", "job-worker-0"), ("Delete", "Pod", "job-worker-1"), ("Delete", "Service", "job-worker-0")],
        ),
        ("Unfinished", DONE, True, [("Delete", "Pod", "job-worker-0"), ("Delete", "Service", "job-worker-0")]),
        ("None", DONE, True, []),
        # The evidence first: pods are deleted once it is observed.
        ("All", DONE, False, [("KeepEvidence", "ConfigMap", "job-evidence"), ("Delete", "Service", "job-worker-0")]),
        # A job failed for an invalid spec loses everything, whatever its policy.
        (
            "None",
            INVALID,
            True,
            [("Delete", "Pod", "job-worker-0"), ("Delete", "Pod", "job-worker-1"), ("Delete", "Service", "job-worker-0")],
        ),
    ],
)
def test_finished(policy, status, kept, actions):
    from airflow_t9k.controller.reconcile.steps import finished

    job = generic(**({"cleanUpPolicy": policy} if policy else {}))
    p = finished.finished(state(job, *OBJECTS, *((evidence(job),) if kept else ()), status=status))
    if actions is None:
        assert not p.ended
        assert p.actions == []
        assert "tasks" not in p.sb.new
        return
    assert p.ended
    assert not p.keep_status
    assert kinds(p) == actions
    assert p.sb.new["phase"] == status["phase"]  # never changes
    assert [e["phase"] for e in p.sb.new["tasks"][0]["status"]] == ["Running", "Succeeded"]
