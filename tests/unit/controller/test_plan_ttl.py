"""plan() and ``ttlSecondsAfterFinished``: a finished job is deleted that long after it ended
(issue 44, item 8). GenericJob keeps the field in ``spec``, the other T9k kinds in ``runPolicy``;
AscendJob ignores it (seed 002)."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.controller.reconcile.actions import DeleteJob, KeepEvidence
from tests.builders import NOW, colossal, evidence, generic, pod, pytorch, run, service, ts
from tests.unit.controller.test_plan_ascend import apod, ascend, leader_service

W0, W1 = "job-worker-0", "job-worker-1"
ENDED = {"Succeeded": "Completed", "Failed": "Failed"}


def done(phase: str = "Succeeded", ago: float = 0) -> dict:
    """The status of a T9k job that ended ``ago`` seconds before NOW, as the pass that ended it wrote it."""
    return {"phase": phase, "conditions": [
        {"type": "Initializing", "status": "True", "reason": "-", "message": "", "lastTransitionTime": ts(-600)},
        {"type": ENDED[phase], "status": "True", "reason": phase, "message": "done", "lastTransitionTime": ts(-ago)},
        {"type": "Running", "status": "False", "reason": phase, "message": "ended", "lastTransitionTime": ts(-ago)},
    ]}  # fmt: skip


def with_ttl(job: dict, ttl: int | None) -> dict:
    job = copy.deepcopy(job)
    if ttl is not None:
        if job["kind"] == "GenericJob":
            job["spec"]["ttlSecondsAfterFinished"] = ttl
        else:
            job["spec"].setdefault("runPolicy", {})["ttlSecondsAfterFinished"] = ttl
    return job


def deletes_job(p) -> list[DeleteJob]:
    return [a for a in p.actions if isinstance(a, DeleteJob)]


# -- the table ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ttl", "status", "deleted", "wake"),
    [
        (None, done(ago=10**6), False, None),  # no TTL: kept forever, and no timer
        (60, done(ago=10), False, 50.0),  # not yet: woken when the TTL passes, not polled
        (60, done("Failed", ago=59), False, 1.0),
        (60, done(ago=60), True, None),  # reached: deleted
        (60, done("Failed", ago=3600), True, None),  # long past (a controller that was down meanwhile)
        (0, done(ago=0), True, None),  # 0: as soon as it finished
    ],
    ids=["no-ttl", "before", "before-failed", "reached", "long-past", "zero"],
)
@pytest.mark.parametrize("kind", ["GenericJob", "PyTorchTrainingJob", "ColossalAIJob"])
def test_a_finished_job_is_deleted_once_its_ttl_has_passed(kind, ttl, status, deleted, wake):
    base = {"GenericJob": generic(), "PyTorchTrainingJob": pytorch("job"), "ColossalAIJob": colossal("job")}[kind]
    job = with_ttl(base, ttl)
    p = run(job, pod(W0, "Succeeded", 0), status=status)
    if deleted:
        assert p.actions == (DeleteJob(job["metadata"]["uid"]),)  # the job itself, by its uid; nothing else
        assert p.status == status  # nothing written: the end on record is what the decision rests on
        assert [e.reason for e in p.events] == ["TTLExpired"]
        assert "ttlSecondsAfterFinished" in p.events[0].message
        assert p.requeue_after is None
    else:
        assert deletes_job(p) == []
        assert p.status["phase"] == status["phase"]
        assert p.requeue_after == wake


def test_a_job_still_running_is_never_touched():
    job = with_ttl(generic(), 0)
    running = {"phase": "Running", "conditions": [{"type": "Running", "status": "True", "reason": "-", "message": "",
                                                   "lastTransitionTime": ts(-3600)}]}  # fmt: skip
    for status in (None, running):
        p = run(job, pod(W0), pod(W1), service(W0), service(W1), status=status)
        assert deletes_job(p) == []
        assert p.status["phase"] in ("Pending", "Running")
        assert not [e for e in p.events if e.reason == "TTLExpired"]


def test_the_pass_that_ends_the_job_asks_to_be_woken_at_the_ttl():
    job = with_ttl(generic(), 30)
    first = run(job, pod(W0), pod(W1), service(W0), service(W1))
    ends = run(job, pod(W0, "Succeeded", 0), pod(W1, "Succeeded", 0), service(W0), service(W1), status=first.status)
    assert ends.status["phase"] == "Succeeded"
    assert deletes_job(ends) == []  # the end is recorded first; the next pass decides from it
    assert ends.requeue_after == 30.0


def test_zero_ends_the_job_then_deletes_it_in_the_next_pass():
    job = with_ttl(generic(), 0)
    first = run(job, pod(W0), pod(W1), service(W0), service(W1))
    ends = run(job, pod(W0, "Succeeded", 0), pod(W1, "Succeeded", 0), status=first.status)
    assert ends.status["phase"] == "Succeeded"
    assert deletes_job(ends) == []
    assert ends.requeue_after == 0.0
    after = run(job, pod(W0, "Succeeded", 0), pod(W1, "Succeeded", 0), status=ends.status)
    assert after.actions == (DeleteJob("uid-job"),)


def test_a_repeated_pass_after_the_delete_is_a_no_op():
    job = with_ttl(generic(), 60)
    first = run(job, pod(W0, "Succeeded", 0), status=done(ago=120))
    assert deletes_job(first) == [DeleteJob("uid-job")]
    # The executor marks the cached job as being deleted (as the API server does with finalizers):
    # the pass before the watch brings the deletion asks for nothing, writes nothing.
    job["metadata"]["deletionTimestamp"] = ts(0)
    again = run(job, pod(W0, "Succeeded", 0), status=done(ago=121))
    assert again.actions == ()
    assert again.events == ()
    assert again.status == done(ago=121)
    assert again.requeue_after is None


def test_before_the_ttl_the_clean_up_and_its_evidence_go_on_as_ever():
    job = with_ttl(generic(cleanUpPolicy="All"), 600)
    p = plan(job | {"status": done(ago=5)}, Observed.of(pod(W0, "Succeeded", 0), service(W0)), NOW)
    assert [type(a).__name__ for a in p.actions] == ["KeepEvidence", "Delete"]  # pods wait for their evidence
    assert p.requeue_after == 595.0
    kept = plan(job | {"status": done(ago=5)}, Observed.of(pod(W0, "Succeeded", 0), service(W0), evidence(job)), NOW)
    assert sorted(kept.deletes()) == [W0, W0]  # the pod and its Service
    assert not [a for a in kept.actions if isinstance(a, KeepEvidence)]


def test_a_failed_invalid_spec_job_is_deleted_too():
    job = with_ttl(generic(), 10)
    job["spec"]["replicaSpecs"][0]["replicas"] = -1  # invalid, as a CRD applied by hand lets through
    status = done("Failed", ago=11)
    status["conditions"][1]["reason"] = "InvalidSpec"
    assert run(job, status=status).actions == (DeleteJob("uid-job"),)
    status = done("Failed", ago=1)
    status["conditions"][1]["reason"] = "InvalidSpec"
    assert run(job, status=status).requeue_after == 9.0  # woken at the TTL, though the pass ends at "shape"


def test_a_ttl_that_is_not_a_non_negative_integer_fails_a_new_job_and_keeps_a_finished_one():
    job = with_ttl(generic(), 10)
    job["spec"]["ttlSecondsAfterFinished"] = -1
    p = run(job)
    assert p.status["phase"] == "Failed"
    assert "ttlSecondsAfterFinished must be a non-negative integer" in next(
        c["message"] for c in p.status["conditions"] if c["type"] == "Failed"
    )
    assert deletes_job(run(job, status=done(ago=100))) == []


def test_a_finished_status_without_an_end_time_keeps_the_job():
    status = done(ago=100)
    for c in status["conditions"]:
        c.pop("lastTransitionTime")
    assert deletes_job(run(with_ttl(generic(), 0), status=status)) == []


# -- AscendJob: accepted and ignored (seed 002) --------------------------------------------------
@pytest.mark.parametrize("ttl", [0, 60])
def test_ascendjob_ignores_ttl_seconds_after_finished(ttl):
    job = ascend(runPolicy={"ttlSecondsAfterFinished": ttl})
    status = {"conditions": [{"type": "Succeeded", "status": "True", "reason": "Succeeded", "message": "done",
                              "lastTransitionTime": ts(-3600)}], "completionTime": ts(-3600)}  # fmt: skip
    p = run(job, leader_service(), apod("ac-master-0", "Succeeded", 0), status=status)
    assert deletes_job(p) == []
    assert p.requeue_after is None
