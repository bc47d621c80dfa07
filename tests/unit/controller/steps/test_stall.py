"""Step "stall" (hang detection, issue 47 item 1), through ``plan()`` pass after pass as the
controller runs it, and alone where one input is the point."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta

import pytest

from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.controller.reconcile.actions import Delete, KeepEvidence, Patch
from airflow_t9k.controller.reconcile.evidence import ANNOTATION_STALL, STALL_LOG, STALL_SUMMARY
from airflow_t9k.controller.reconcile.inplace import ANNOTATION_AUTHORIZED, ANNOTATION_GROUP, GATE
from airflow_t9k.controller.reconcile.stall import GRACE
from airflow_t9k.controller.reconcile.steps import stall
from airflow_t9k.kinds.base import ANNOTATION_RESTARTS
from tests.builders import NOW, generic, pod, pytorch, restart, service, ts
from tests.unit.controller.steps.state import state

RUNNING = {"type": "Running", "status": "True", "reason": "-", "message": "All pods are running normally."}
INIT = {"type": "Initializing", "status": "True", "reason": "-", "message": "The job has been initialized successfully."}


def job(deadline: int | None = 60, policy: str = "OnFailure", limit: int | None = 3, **spec):
    extra = {"progressDeadlineSeconds": deadline} if deadline is not None else {}
    return restart(generic("j", ("worker", 2), **extra, **spec), policy, limit)


def running(reported: float | None, **extra) -> dict:
    """A running job's status; ``reported``: seconds from NOW of its last report (None: never)."""
    status = {"phase": "Running", "startTime": ts(-3600), "conditions": [copy.deepcopy(INIT), copy.deepcopy(RUNNING)]}
    if reported is not None:
        status["progress"] = {"replica": "j-worker-0", "step": 7, "reportedAt": ts(reported), "updated": ts(reported)}
    return {**status, **extra}


def pods(equipped: bool = False, **changes) -> list[dict]:
    out = [pod("j-worker-0"), pod("j-worker-1")]
    for p in out:
        if equipped:  # built for in-place restarts (reconcile/inplace.py)
            p["spec"] = {"initContainers": [{"name": GATE}], "containers": [{"name": "main"}]}
        p["metadata"]["annotations"].update(changes)
    return out


def kept(key: str) -> dict:
    """The job's evidence ConfigMap with the stall ``key``'s part, as the cache holds it (no data)."""
    return {"kind": "ConfigMap", "metadata": {"name": "j-evidence", "annotations": {ANNOTATION_STALL: key}}}


def run(j, status, *objects, now=NOW, **observed):
    """One pass; the job's Services exist (the pass is about its pods)."""
    j = copy.deepcopy(j)
    j["status"] = status
    names_ = [o["metadata"]["name"] for o in objects if o["kind"] == "Pod"]
    services = [service(n, n.split("-")[-2]) for n in names_ if j["kind"] != "AscendJob"]
    return plan(j, replace(Observed.of(*objects, *services), **observed), now)


def cond(status, type_="Stalled"):
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


def names(p, kind=None):
    return [(type(a).__name__, a.name) for a in p.actions if kind is None or isinstance(a, kind)]


# -- when it is judged -------------------------------------------------------------------------


def test_a_job_that_never_reported_is_never_judged_however_long_it_runs():
    p = run(job(), running(None), *pods(), now=NOW + timedelta(days=3))
    assert cond(p.status) is None
    assert "stall" not in p.status
    assert p.requeue_after is None  # no timer either: nothing to wait for


# Stamps are whole seconds: the deadline counts from the end of the report's second (stall.STAMP).
@pytest.mark.parametrize(("reported", "left"), [(-10, 51.0), (-59, 2.0), (0, 61.0), (-60, 1.0)])
def test_a_report_within_the_deadline_wakes_the_job_at_report_plus_deadline(reported, left):
    p = run(job(), running(reported), *pods())
    assert cond(p.status) is None
    assert p.requeue_after == pytest.approx(left)
    assert (p.actions, p.events) == ((), ())  # a timer, no request: nothing written, nothing done


def test_the_newest_report_counts_whether_read_in_memory_or_recorded():
    report = {"replica": "j-worker-0", "time": ts(-5), "values": {"step": 9}}
    p = run(job(), running(-100), *pods(), report=report)
    assert cond(p.status) is None
    assert p.requeue_after == pytest.approx(56.0)  # from the report read, not the one recorded


@pytest.mark.parametrize(
    ("extra", "since", "left"),
    [
        # A replica restarted (any cause) after the last report: a restarted program needs its time.
        ({"restartHistory": [{"time": ts(-30), "replica": "j-worker-1", "cause": "x", "counted": True, "podUID": "u"}]},
         None, 31.0),
        ({"lastResumeTime": ts(-20)}, None, 41.0),  # resumed after a pause or a Kueue eviction
        ({}, NOW - timedelta(seconds=45), 16.0),  # this controller listens only since 45 s ago
        ({}, NOW - timedelta(hours=1), None),  # listening long before the report: the report counts
    ],
)  # fmt: skip
def test_the_silence_starts_at_the_last_report_restart_resume_or_when_the_controller_began_to_listen(extra, since, left):
    p = run(job(), running(-100, **extra), *pods(), progress_since=since)
    if left is None:
        assert cond(p.status)["status"] == "True"
    else:
        assert cond(p.status) is None
        assert p.requeue_after == pytest.approx(left)


@pytest.mark.parametrize(
    ("status", "fields"),
    [
        (running(-100, phase="Paused"), {}),  # paused
        (running(-100, phase="Pending"), {}),  # queued, or not started yet
        (running(-100, phase="Unknown"), {}),  # a node stopped reporting
        (running(-100), {"debug": True}),  # Debug mode: a breakpoint is no hang
        (running(-100), {"outcome": ("Failed", "Failed", "a rule")}),  # ends in this pass anyway
    ],
)
def test_a_job_not_running_is_not_judged(status, fields):
    p = stall.stall(state(job(), *pods(), status=status, **fields))
    assert (p.sb.condition("Stalled"), p.actions, p.stall_in) == (None, [], None)


def test_a_paused_job_is_not_judged_through_the_whole_pass():
    p = run(job(runMode={"pause": {"enabled": True}}), running(-100), *pods())
    assert cond(p.status) is None
    assert p.status["phase"] == "Paused"


def test_a_controller_that_cannot_hear_the_job_does_not_judge_it():
    p = run(job(), running(-100), *pods(), progress_heard=False)
    assert cond(p.status) is None
    assert not p.actions


def test_without_the_field_nothing_is_judged():
    p = run(job(deadline=None), running(-10_000), *pods())
    assert cond(p.status) is None
    assert p.requeue_after is None


def test_a_replica_being_restarted_goes_first():
    failed = [pod("j-worker-0"), pod("j-worker-1", phase="Failed", exit_code=1)]
    p = run(job(), running(-100), *failed)
    assert cond(p.status) is None  # the failed replica restarts (counted), which starts the silence again
    assert names(p, Delete) == [("Delete", "j-worker-1")]


# -- decide durably, then act ------------------------------------------------------------------


def test_the_decision_is_on_record_before_anything_but_the_evidence_is_asked_for():
    p = run(job(), running(-100), *pods())
    c = cond(p.status)
    assert (c["status"], c["reason"]) == ("True", "ProgressDeadlineExceeded")
    assert "since 2026-11-25T11:58:20Z" in c["message"]
    assert "from replica j-worker-0" in c["message"]
    assert p.status["stall"] == {"key": ts(-100), "decidedAt": ts(0), "lastReportAt": ts(-100), "lastReplica": "j-worker-0",
                                 "deadlineSeconds": 60, "action": "Restart"}  # fmt: skip
    [keep] = [a for a in p.actions if isinstance(a, KeepEvidence)]
    assert len(p.actions) == 1  # no pod touched before the evidence is kept
    assert keep.pods == ("j-worker-0", "j-worker-1")
    assert keep.manifest["metadata"]["annotations"] == {ANNOTATION_STALL: ts(-100)}
    assert (keep.log_key, STALL_SUMMARY in keep.manifest["data"], keep.merge) == (STALL_LOG, True, False)
    assert '"lastReplica": "j-worker-0"' in keep.manifest["data"][STALL_SUMMARY]
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "Stalled")]
    assert p.requeue_after == GRACE  # goes on without the evidence if it cannot be written
    assert p.status["phase"] == "Running"


def test_a_pass_repeated_before_the_evidence_is_seen_decides_nothing_again():
    first = run(job(), running(-100), *pods())
    again = run(job(), first.status, *pods(), now=NOW + timedelta(seconds=1))
    assert again.status == first.status
    assert again.events == ()
    assert names(again) == [("KeepEvidence", "j-evidence")]  # asked again, nothing else


def test_evidence_kept_then_every_replica_restarts_counted_once():
    first = run(job(), running(-100), *pods())
    p = run(job(), first.status, *pods(), kept(ts(-100)), now=NOW + timedelta(seconds=2))
    assert sorted(names(p)) == [("Delete", "j-worker-0"), ("Delete", "j-worker-1")]
    assert {a.uid for a in p.actions} == {"uid-j-worker-0", "uid-j-worker-1"}
    [entry] = p.status["restartHistory"]
    assert entry["reason"] == "ProgressDeadlineExceeded"
    assert entry["counted"] is True
    assert entry["replica"] == "j-worker-0 (whole group)"
    assert entry["podUID"] == f"stall/{ts(-100)}"
    assert [r["restartCount"] for r in p.status["tasks"][0]["status"]] == [1, 0]  # one restart, the reporting replica's
    assert p.status["stall"]["restartedAt"] == ts(2)
    assert p.status["stall"]["pods"] == {"j-worker-0": "uid-j-worker-0", "j-worker-1": "uid-j-worker-1"}
    assert [e.reason for e in p.events] == ["StallRestarting"]
    assert cond(p.status)["status"] == "True"
    assert "waiting for a report" in cond(p.status)["message"]

    # A crash before the deletes: the same pass again counts nothing and deletes the same pods.
    again = run(job(), p.status, *pods(), kept(ts(-100)), now=NOW + timedelta(seconds=3))
    assert sorted(names(again)) == sorted(names(p))
    assert len(again.status["restartHistory"]) == 1
    assert [r["restartCount"] for r in again.status["tasks"][0]["status"]] == [1, 0]
    assert again.events == ()

    # The pods recreated (new uids): the restart on record is done; Stalled waits for a report.
    new = [pod("j-worker-0", restarts=1), pod("j-worker-1")]
    for n in new:
        n["metadata"]["uid"] += "-2"
    done = run(job(), again.status, *new, kept(ts(-100)), now=NOW + timedelta(seconds=10))
    assert not [a for a in done.actions if isinstance(a, (Delete, Patch))]
    assert cond(done.status)["status"] == "True"
    assert done.requeue_after == pytest.approx(53.0)  # the next deadline runs from the restart (its second's end)

    # A report after the restart clears Stalled.
    report = {"replica": "j-worker-0", "time": ts(20), "values": {"step": 8}}
    ok = run(job(), done.status, *new, kept(ts(-100)), now=NOW + timedelta(seconds=21), report=report)
    c = cond(ok.status)
    assert (c["status"], c["reason"]) == ("False", "ProgressResumed")
    assert [e.reason for e in ok.events] == ["ProgressResumed"]
    assert ok.status["stall"]["resolvedAt"] == ts(21)
    assert ok.requeue_after == pytest.approx(60.0)  # the timer again, from the new report

    # Silent again past the deadline: a new stall, with a key of its own.
    status = {**ok.status, "progress": {**ok.status["progress"], "reportedAt": ts(20)}}
    again = run(job(), status, *new, kept(ts(-100)), now=NOW + timedelta(seconds=81))
    assert (cond(again.status)["status"], again.status["stall"]["key"]) == ("True", ts(20))
    assert [e.reason for e in again.events] == ["Stalled"]


def test_in_place_every_replica_is_asked_once_and_the_counted_one_carries_its_count():
    first = run(job(), running(-100), *pods(equipped=True))
    p = run(job(), first.status, *pods(equipped=True), kept(ts(-100)), now=NOW + timedelta(seconds=2))
    patches = {a.name: a.body["metadata"]["annotations"] for a in p.actions if isinstance(a, Patch)}
    key = f"stall/{ts(-100)}"
    assert patches == {"j-worker-0": {ANNOTATION_AUTHORIZED: "1", ANNOTATION_GROUP: key, ANNOTATION_RESTARTS: "1"},
                       "j-worker-1": {ANNOTATION_AUTHORIZED: "1", ANNOTATION_GROUP: key}}  # fmt: skip
    assert p.status["restartHistory"][0]["inPlace"] is True
    assert not p.deletes("Pod")
    asked = pods(equipped=True, **{ANNOTATION_AUTHORIZED: "1", ANNOTATION_GROUP: key})
    asked[0]["metadata"]["annotations"][ANNOTATION_RESTARTS] = "1"
    again = run(job(), p.status, *asked, kept(ts(-100)), now=NOW + timedelta(seconds=3))
    assert not [a for a in again.actions if isinstance(a, (Delete, Patch))]  # asked once
    # One that ended before its agent could restart it is recreated as part of the same restart.
    asked[1]["status"]["phase"] = "Failed"
    late = run(job(), p.status, *asked, kept(ts(-100)), now=NOW + timedelta(seconds=4))
    assert names(late, Delete) == [("Delete", "j-worker-1")]
    assert late.status.get("phase") == "Running"


@pytest.mark.parametrize(
    ("j", "status", "why"),
    [
        (job(policy="Never"), running(-100), "restarts no failure"),
        (job(limit=0), running(-100), "restarts no failure"),
        (job(limit=2), running(-100, tasks=[{"type": "worker", "restartCount": 2, "status": [
            {"name": "j-worker-0", "restartCount": 2}, {"name": "j-worker-1", "restartCount": 0}]}]),
         "replica j-worker-0 has used its 2 restart(s)"),
        (pytorch("j", runPolicy={"progressDeadlineSeconds": 60, "backoffLimit": 1}), running(-100, tasks=[
            {"type": "worker", "restartCount": 1, "status": [{"name": "j-worker-0", "restartCount": 1}]}]),
         "the job's restart budget (backoffLimit) is spent"),
    ],
)  # fmt: skip
def test_no_restart_left_fails_the_job_after_its_evidence(j, status, why):
    objs = pods() if j["kind"] == "GenericJob" else [pod("j-master-0"), pod("j-worker-0"), pod("j-worker-1")]
    if j["kind"] != "GenericJob":
        status["progress"]["replica"] = "j-master-0"
    first = run(j, status, *objs)
    assert first.status["stall"]["action"] == "Fail"
    assert why in first.status["stall"]["refused"]
    assert why in cond(first.status)["message"]
    assert first.status["phase"] == "Running"
    p = run(j, first.status, *objs, kept(ts(-100)), now=NOW + timedelta(seconds=2))
    failed = cond(p.status, "Failed")
    assert (p.status["phase"], failed["reason"]) == ("Failed", "ProgressDeadlineExceeded")
    assert why in failed["message"]
    assert "No replica reported progress for 60s" in failed["message"]
    # Its end's evidence merges into the same ConfigMap before clean-up deletes the pods.
    [keep] = [a for a in p.actions if isinstance(a, KeepEvidence)]
    assert (keep.merge, keep.log_key) == (True, "{pod}.log")
    assert not p.deletes("Pod")
    assert [e.reason for e in p.events][:1] == ["Failed"]


def test_a_report_before_the_restart_ends_the_stall_with_nothing_restarted():
    first = run(job(), running(-100), *pods())
    report = {"replica": "j-worker-0", "time": ts(1), "values": {"step": 8}}
    p = run(job(), first.status, *pods(), kept(ts(-100)), now=NOW + timedelta(seconds=2), report=report)
    assert cond(p.status)["status"] == "False"
    assert cond(p.status)["reason"] == "ProgressResumed"
    assert not p.actions
    assert "restartHistory" not in p.status
    assert p.requeue_after == pytest.approx(60.0)


def test_evidence_that_cannot_be_written_holds_the_restart_back_for_a_minute_only():
    first = run(job(), running(-100), *pods())
    waiting = run(job(), first.status, *pods(), now=NOW + timedelta(seconds=30))
    assert names(waiting) == [("KeepEvidence", "j-evidence")]
    assert waiting.requeue_after == pytest.approx(GRACE - 30)
    late = run(job(), first.status, *pods(), now=NOW + timedelta(seconds=GRACE + 1))
    assert sorted(names(late)) == [("Delete", "j-worker-0"), ("Delete", "j-worker-1")]


def test_silence_after_a_restart_is_a_new_stall():
    first = run(job(), running(-100), *pods())
    p = run(job(), first.status, *pods(), kept(ts(-100)), now=NOW + timedelta(seconds=2))
    new = [pod("j-worker-0", restarts=1), pod("j-worker-1")]
    for n in new:
        n["metadata"]["uid"] += "-2"
    again = run(job(), p.status, *new, kept(ts(-100)), now=NOW + timedelta(seconds=70))
    assert again.status["stall"]["key"] == ts(2)
    assert "restartedAt" not in again.status["stall"]
    assert [e.reason for e in again.events] == ["Stalled"]
    assert names(again) == [("KeepEvidence", "j-evidence")]
    assert next(a for a in again.actions if isinstance(a, KeepEvidence)).merge is True  # beside the first stall's


def test_the_job_ending_otherwise_clears_stalled():
    first = run(job(), running(-100), *pods())
    ended = [pod("j-worker-0", phase="Succeeded", exit_code=0), pod("j-worker-1", phase="Succeeded", exit_code=0)]
    p = run(job(), first.status, *ended, kept(ts(-100)), now=NOW + timedelta(seconds=2))
    assert p.status["phase"] == "Succeeded"
    assert (cond(p.status)["status"], cond(p.status)["reason"]) == ("False", "StallCleared")


def test_ascendjob_keeps_the_stall_and_shows_the_condition_in_its_own_status():
    from tests.unit.controller.test_plan_ascend import apod, ascend, leader_service
    from tests.unit.controller.test_plan_ascend import running as ascend_running

    j = ascend(policy="OnFailure", runPolicy={"progressDeadlineSeconds": 60})
    objs = [leader_service(), *(apod(n) for n in ("ac-master-0", "ac-worker-0", "ac-worker-1"))]
    status = {**ascend_running(j), "progress": {"replica": "ac-master-0", "reportedAt": ts(-100), "updated": ts(-100)}}
    first = run(j, status, *objs)
    c = cond(first.status)
    assert (c["status"], c["reason"]) == ("True", "ProgressDeadlineExceeded")
    assert first.status["conditions"][-1]["type"] == "Stalled"  # kubectl's State column says so
    assert first.status["stall"]["action"] == "Restart"
    evidence = {"kind": "ConfigMap", "metadata": {"name": "ac-evidence", "annotations": {ANNOTATION_STALL: ts(-100)}}}
    p = run(j, first.status, *objs, evidence, now=NOW + timedelta(seconds=2))
    assert sorted(p.deletes("Pod")) == ["ac-master-0", "ac-worker-0", "ac-worker-1"]
    assert p.status["restartHistory"][0]["reason"] == "ProgressDeadlineExceeded"
    assert next(x for x in p.status["conditions"] if x["type"] == "Restarting")["status"] == "True"
    report = {"replica": "ac-master-0", "time": ts(20), "values": {"step": 1}}
    ok = run(j, p.status, *objs, evidence, now=NOW + timedelta(seconds=21), report=report)
    assert cond(ok.status)["status"] == "False"
    assert ok.status["conditions"][-1]["type"] != "Stalled"
