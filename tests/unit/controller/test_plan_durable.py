"""plan() replayed after a lost write: a decision that landed in status is never taken twice.

The executor writes status before it acts. These cases are the passes that follow a crash
or a Conflict between the two: the status says a restart (or the end) was decided, the
cluster still shows the state before the action.
"""

from __future__ import annotations

import pytest

from tests.builders import generic, pod, restart, run

W0, W1 = "job-worker-0", "job-worker-1"


def _recorded(restarts: int, phase: str = "Running") -> dict:
    return {"phase": phase, "tasks": [{"type": "worker", "restartCount": restarts,
                                       "status": [{"name": W0, "restartCount": restarts},
                                                  {"name": W1, "restartCount": 0}]}]}  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "limit", "pod_phase", "code", "attempt", "recorded", "deletes", "count_after", "job_phase"),
    [
        # The decision to restart pod attempt 0 landed (count 1); the pod is still there.
        ("OnFailure", 3, "Failed", 1, 0, 1, True, 1, "Running"),
        # Same at the last allowed restart: still a restart in flight, not "limit reached".
        ("OnFailure", 3, "Failed", 1, 2, 3, True, 3, "Running"),
        ("OnFailure", 1, "Failed", 1, 0, 1, True, 1, "Running"),
        # Always restarts a succeeded pod; the recorded decision is honoured, not counted again.
        ("Always", 2, "Succeeded", 0, 1, 2, True, 2, "Running"),
        # No decision recorded yet: the normal path counts once.
        ("OnFailure", 3, "Failed", 1, 1, 1, True, 2, "Running"),
        # Limit reached with nothing recorded beyond the pod: the job fails, nothing deleted.
        ("OnFailure", 1, "Failed", 1, 1, 1, False, 1, "Failed"),
    ],
    ids=["first-restart-replayed", "last-restart-replayed", "limit-1-replayed", "always-replayed",
         "fresh-decision", "exhausted"],
)  # fmt: skip
def test_replayed_restart_decision(policy, limit, pod_phase, code, attempt, recorded, deletes, count_after, job_phase):
    job = restart(generic(), policy, limit)
    p = run(job, pod(W0, pod_phase, code, restarts=attempt), pod(W1), status=_recorded(recorded))
    assert (W0 in p.deletes("Pod")) is deletes
    entry = next(e for t in p.status["tasks"] for e in t["status"] if e["name"] == W0)
    assert entry["restartCount"] == count_after
    assert p.status["phase"] == job_phase
    assert p.creates("Pod") == []


def test_replaying_the_same_pass_any_number_of_times_counts_one_restart():
    job = restart(generic(), "OnFailure", 3)
    observed = (pod(W0, "Failed", 1, restarts=0), pod(W1))
    first = run(job, *observed, status={"phase": "Running"})
    assert W0 in first.deletes("Pod")
    status = first.status
    for _ in range(5):  # the delete never happened: each pass sees the same failed pod
        again = run(job, *observed, status=status)
        assert W0 in again.deletes("Pod")
        assert again.status["tasks"][0]["restartCount"] == 1
        assert [e.reason for e in again.events if e.reason == "ReplicaRestarting"] == []
        status = again.status


def test_replacement_pod_is_created_with_the_recorded_count():
    job = restart(generic(), "OnFailure", 3)
    p = run(job, pod(W1), status=_recorded(2))
    created = next(a.manifest for a in p.actions if getattr(a, "manifest", {}).get("kind") == "Pod")
    assert created["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "2"


@pytest.mark.parametrize("cleanup", ["All", "Unfinished", "None"])
def test_finished_job_never_creates_pods_again(cleanup):
    """The finished state landed, the clean-up deleted the pods: nothing comes back."""
    job = generic(cleanUpPolicy=cleanup)
    for phase in ("Succeeded", "Failed"):
        p = run(job, status={"phase": phase})
        assert p.creates() == []
        assert p.status["phase"] == phase


def test_shared_budget_is_not_spent_twice():
    job = restart(generic(), "OnFailure", 5)
    job["kind"] = "GenericJob"
    # Both replicas' restarts landed; neither pod was deleted yet.
    status = {"phase": "Running", "tasks": [{"type": "worker", "restartCount": 2, "status": [
        {"name": W0, "restartCount": 1}, {"name": W1, "restartCount": 1}]}]}  # fmt: skip
    p = run(job, pod(W0, "Failed", 1, restarts=0), pod(W1, "Failed", 1, restarts=0), status=status)
    assert sorted(p.deletes("Pod")) == [W0, W1]
    assert p.status["tasks"][0]["restartCount"] == 2
    assert p.status["phase"] == "Running"


# -- a job failed for an invalid spec keeps nothing running -------------------------------


def test_spec_made_invalid_deletes_the_pods_already_created():
    job = generic(successRules=[{"chief": [0]}])  # names a type the job does not have
    p = run(job, pod(W0), pod(W1))
    assert p.status["phase"] == "Failed"
    assert sorted(p.deletes("Pod")) == [W0, W1]


def test_failed_invalid_job_keeps_removing_what_is_left():
    job = generic(successRules=[{"chief": [0]}])
    first = run(job)
    later = run(job, pod(W0), status=first.status)
    assert later.deletes("Pod") == [W0]
    assert later.status == first.status


def test_refused_pod_failure_removes_the_other_replicas_on_the_next_pass():
    from airflow_t9k.controller.reconcile.plan import rejected
    from tests.builders import NOW

    job = generic()
    status, _ = rejected(job, run(job).status, ["the API server rejected Pod job-worker-1: bad"], NOW)
    p = run(job, pod(W0), status=status)
    assert p.deletes("Pod") == [W0]
    assert p.status["phase"] == "Failed"


def test_a_job_that_succeeded_before_its_spec_went_bad_keeps_its_pods():
    job = generic(successRules=[{"chief": [0]}])
    p = run(job, pod(W0, "Succeeded", 0), status={"phase": "Succeeded"})
    assert p.deletes("Pod") == []
    assert p.status["phase"] == "Succeeded"
