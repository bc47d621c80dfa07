"""``activeDeadlineSeconds`` counts running time since the last resume (issue 30, item 2).

A job paused mid-run (Pause mode, the operators' ``on_kill_action="pause"``) or evicted by Kueue
and admitted again must not spend its deadline while it waits: the clock restarts at the resume,
as batch/v1 Job and Kubeflow's operators restart it. Each case is a sequence of passes, the
status of one fed into the next, as the controller does after its write.
"""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.reconcile import Observed, plan
from tests.builders import at, cond, pod, pytorch, ts
from tests.unit.controller.test_plan_queueing import ADMISSION, ADMITTED, PREEMPTED, queued, wl

M, W0, W1 = "pt-master-0", "pt-worker-0", "pt-worker-1"


def job(paused: bool = False) -> dict:
    out = pytorch(runPolicy={"activeDeadlineSeconds": 30})
    if paused:
        out["spec"]["runMode"] = {"pause": {"enabled": True}}
    return out


def step(j: dict, status: dict | None, seconds: float, *objects: dict, **observed) -> dict:
    j = copy.deepcopy(j)
    if status is not None:
        j["status"] = status
    return plan(j, Observed.of(*objects, **observed), at(seconds)).status


RUNNING = (pod(M), pod(W0), pod(W1))


def test_a_paused_job_does_not_spend_its_deadline_while_paused():
    # Ran 5 s, paused 35 s, resumed: the case failed DeadlineExceeded half a second after the resume.
    status = step(job(), None, 0, *RUNNING)
    status = step(job(), status, 0.5, *RUNNING)
    assert status["phase"] == "Running"
    status = step(job(paused=True), status, 5, *RUNNING)
    assert status["phase"] == "Paused"
    status = step(job(paused=True), status, 40)  # the pods are gone; still paused
    status = step(job(), status, 40)  # unpaused: the first pass that gets past the gates
    assert status["lastResumeTime"] == ts(40)
    assert status["startTime"] == ts(0)  # when the job first started: kept (wall time, the UI)
    status = step(job(), status, 40.5, *RUNNING)
    assert status["phase"] == "Running"
    assert cond_of(status, "Failed") is None
    status = step(job(), status, 69, *RUNNING)
    assert status["phase"] == "Running"
    status = step(job(), status, 70.5, *RUNNING)
    assert status["phase"] == "Failed"
    failed = cond_of(status, "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert f"since it resumed at {ts(40)}" in failed["message"]


def test_a_job_evicted_by_kueue_does_not_spend_its_deadline_while_queued_again():
    pt = pytorch(runPolicy={"activeDeadlineSeconds": 30}, scheduler={"t9kScheduler": {"queue": "gpu"}})
    name = "pytorchtrainingjob-pt"
    admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "master", "count": 1}, {"name": "worker", "count": 2}]}
    kueue = {"queueing": "kueue", "local_queues": ("gpu",)}
    admitted = wl(*ADMITTED, admission=admission, name=name)
    status = step(pt, None, 0, admitted, **kueue)
    status = step(pt, status, 0.5, admitted, *RUNNING, **kueue)
    assert status["phase"] == "Running"
    assert status["startTime"] == ts(0)
    evicted = wl(*ADMITTED, PREEMPTED, admission=admission, name=name)
    status = step(pt, status, 5, evicted, *RUNNING, **kueue)
    assert status["phase"] == "Pending"
    status = step(pt, status, 6, wl(("QuotaReserved", "False", "Pending", "waiting"), name=name), **kueue)
    assert status["phase"] == "Pending"
    status = step(pt, status, 40, admitted, **kueue)  # admitted again after 34 s in the queue
    assert status["lastResumeTime"] == ts(40)
    status = step(pt, status, 45, admitted, *RUNNING, **kueue)
    assert status["phase"] == "Running"
    status = step(pt, status, 70.5, admitted, *RUNNING, **kueue)
    assert cond_of(status, "Failed")["reason"] == "DeadlineExceeded"


@pytest.mark.parametrize("seconds", [29, 31])
def test_without_a_pause_the_deadline_counts_from_start_time(seconds):
    status = step(job(), None, 0, *RUNNING)
    status = step(job(), status, seconds, *RUNNING)
    assert "lastResumeTime" not in status
    assert (status["phase"] == "Failed") == (seconds > 30)


def cond_of(status: dict, type_: str) -> dict | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == type_ and c["status"] == "True"), None)


def test_first_admission_is_no_resume():
    p = plan(queued(), Observed.of(wl(*ADMITTED, admission=ADMISSION), queueing="kueue", local_queues=("gpu",)), at(3))
    assert p.status["startTime"] == ts(3)
    assert "lastResumeTime" not in p.status
    assert cond(p, "Admitted")["status"] == "True"
