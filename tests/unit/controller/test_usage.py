"""reconcile/usage.py: accelerator-seconds, waste and wall time, each pod run counted once."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_t9k.api.outcome import interpret, usage_of
from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.controller.reconcile.actions import Create, Delete
from airflow_t9k.controller.reconcile.usage import account, requested
from airflow_t9k.controller.slim import slim_for
from tests.builders import at, evidence, generic, restart, ts

Obj = dict[str, Any]


def gpu_pod(name: str, uid: str, start: float | None, end: float | None = None, code: int = 0, limits: Obj | None = None,
            deleting: bool = False, disrupted: bool = False, restarts: int = 0) -> Obj:  # fmt: skip
    """A pod as the API server serves it: ``start``/``end`` seconds after T0 (None: not yet)."""
    if start is None:
        state: Obj = {"waiting": {"reason": "ContainerCreating"}}
        phase = "Pending"
    elif end is None:
        state, phase = {"running": {"startedAt": ts(start)}}, "Running"
    else:
        state = {"terminated": {"exitCode": code, "startedAt": ts(start), "finishedAt": ts(end)}}
        phase = "Succeeded" if code == 0 else "Failed"
    meta: Obj = {"name": name, "namespace": "ns", "uid": uid,
                 "annotations": {"batch.tensorstack.dev/restart-count": str(restarts)},
                 "labels": {"batch.tensorstack.dev/replica-type": "worker"}}  # fmt: skip
    if deleting:
        meta["deletionTimestamp"] = ts(0)
    status: Obj = {"phase": phase, "containerStatuses": [{"name": "main", "state": state}]}
    if disrupted:
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}]
    spec = {"initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
            "containers": [{"name": "main", "image": "img",
                            "resources": {"limits": limits or {"nvidia.com/gpu": "2", "cpu": "500m"}}}]}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def pods(*ps: Obj) -> dict[str, Obj]:
    return {p["metadata"]["name"]: p for p in ps}


# -- what a pod asks for ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "accelerators", "cpu"),
    [
        ({"nvidia.com/gpu": "2", "cpu": "500m"}, {"nvidia.com/gpu": 2.0}, 0.5),
        ({"huawei.com/Ascend910": 4, "memory": "8Gi", "cpu": 2}, {"huawei.com/Ascend910": 4.0}, 2.0),
        ({"amd.com/gpu": "1", "ephemeral-storage": "1Gi", "hugepages-2Mi": "1Gi"}, {"amd.com/gpu": 1.0}, 0.0),
        ({"nvidia.com/gpu": "0"}, {}, 0.0),  # asks for none: none counted
        ({"nvidia.com/gpu": "lots"}, {}, 0.0),  # not a quantity: ignored, no error
    ],
)  # fmt: skip
def test_requested_counts_extended_resources_of_containers_not_init_containers(limits, accelerators, cpu):
    assert requested(gpu_pod("p", "u", 0, limits=limits)) == (accelerators, cpu)


def test_two_containers_add_up():
    pod = gpu_pod("p", "u", 0)
    pod["spec"]["containers"].append(
        {"name": "side", "resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"cpu": "250m"}}}
    )
    assert requested(pod) == ({"nvidia.com/gpu": 3.0}, 0.75)


# -- the ledger, one pass at a time --------------------------------------------------------

RUNNING = {"phase": "Running", "startTime": ts(0)}


@pytest.mark.parametrize(
    ("case", "observed", "deleted", "phase_after", "now", "gpu_seconds", "wasted", "open_", "closed"),
    [
        # a running pod: on record as open, nothing counted yet (its partial usage moves every second)
        ("running", [gpu_pod("w0", "a", 10)], [], "Running", 100, {}, {}, ["a"], []),
        ("not started", [gpu_pod("w0", "a", None)], [], "Running", 100, None, None, None, None),
        # failed, and this pass deletes it to restart it: counted to its finish, and wasted
        ("restart", [gpu_pod("w0", "a", 10, 70, code=1)], ["a"], "Running", 100,
         {"nvidia.com/gpu": 120}, {"nvidia.com/gpu": 120}, [], ["a"]),
        # evicted through the Eviction API while running: counted to now, wasted
        ("disruption", [gpu_pod("w0", "a", 10, deleting=True, disrupted=True)], [], "Running", 40,
         {"nvidia.com/gpu": 60}, {"nvidia.com/gpu": 60}, [], ["a"]),
        # the job ends this pass: every run counted, a running one to now; none wasted
        ("end", [gpu_pod("w0", "a", 10, 70), gpu_pod("w1", "b", 20)], [], "Succeeded", 80,
         {"nvidia.com/gpu": 120 + 120}, {"nvidia.com/gpu": 0}, [], ["a", "b"]),
    ],
)  # fmt: skip
def test_one_pass(case, observed, deleted, phase_after, now, gpu_seconds, wasted, open_, closed):
    new = account(RUNNING, {**RUNNING, "phase": phase_after}, pods(*observed), deleted, at(now))
    usage = new.get("usage")
    if gpu_seconds is None:
        assert usage is None, case  # nothing ran: no usage at all
        return
    assert usage["accelerators"] == gpu_seconds, case
    assert usage["wasted"] == wasted, case
    assert sorted(usage["open"]) == open_, case
    assert sorted(usage["closed"]) == closed, case
    assert ("wallSeconds" in usage) == (phase_after == "Succeeded")


def test_a_pod_gone_while_open_is_counted_to_now_and_wasted():
    first = account(RUNNING, RUNNING, pods(gpu_pod("w0", "a", 10)), [], at(20))
    gone = account(first, first, {}, [], at(50))  # force-deleted: never seen ending
    assert gone["usage"]["accelerators"] == {"nvidia.com/gpu": 80}
    assert gone["usage"]["wasted"] == {"nvidia.com/gpu": 80}
    assert gone["usage"]["open"] == {}
    assert gone["usage"]["closed"] == []


def test_a_closed_run_still_in_the_cache_counts_once():
    """The pass after the restart's status write still sees the pod (terminating): nothing more."""
    pod = gpu_pod("w0", "a", 10, 70, code=1)
    first = account(RUNNING, RUNNING, pods(pod), ["a"], at(100))
    again = account(first, first, pods({**pod, "metadata": {**pod["metadata"], "deletionTimestamp": ts(101)}}), [], at(110))
    assert again == first
    # and a pass repeated after a conflict starts from the old status: the same decision
    assert account(RUNNING, RUNNING, pods(pod), ["a"], at(105))["usage"]["accelerators"] == first["usage"]["accelerators"]


def test_a_finished_job_is_final():
    done = account(RUNNING, {**RUNNING, "phase": "Failed"}, pods(gpu_pod("w0", "a", 0, 30, code=1)), [], at(40))
    assert done["usage"]["accelerators"] == {"nvidia.com/gpu": 60}
    later = account(done, copy.deepcopy(done), pods(gpu_pod("w0", "a", 0, 30, code=1)), ["a"], at(4000))
    assert later == done


def test_only_now_moving_changes_nothing():
    first = account(RUNNING, RUNNING, pods(gpu_pod("w0", "a", 10), gpu_pod("w1", "b", 12)), [], at(20))
    for later in (30, 600, 86400):
        assert account(first, copy.deepcopy(first), pods(gpu_pod("w0", "a", 10), gpu_pod("w1", "b", 12)), [], at(later)) == first


def test_the_ledger_stays_bounded_over_many_restarts():
    status: Obj = dict(RUNNING)
    for attempt in range(200):
        uid = f"u{attempt}"
        start = attempt * 100
        status = account(status, status, pods(gpu_pod("w0", uid, start)), [], at(start + 1))
        status = account(status, status, pods(gpu_pod("w0", uid, start, start + 50, code=1)), [uid], at(start + 60))
        assert len(status["usage"]["open"]) + len(status["usage"]["closed"]) <= 1
    assert status["usage"]["accelerators"] == {"nvidia.com/gpu": 200 * 2 * 50}
    assert status["usage"]["wasted"] == {"nvidia.com/gpu": 200 * 2 * 50}
    assert status["usage"]["runs"] == 200


def test_summary_for_readers():
    done = account(RUNNING, {**RUNNING, "phase": "Succeeded"}, pods(gpu_pod("w0", "a", 0, 1800)), [], at(1860))
    out = usage_of(done)
    assert out == {"accelerator_seconds": {"nvidia.com/gpu": 3600}, "wasted_accelerator_seconds": {"nvidia.com/gpu": 0},
                   "cpu_seconds": 900, "runs": 1, "wall_seconds": 1860, "accelerator_hours": 1.0}  # fmt: skip
    assert interpret({"status": done}).usage == out  # the operator, trigger and UI read it the same way
    assert usage_of({}) == {}
    assert usage_of({"phase": "Running"}) == {}
    assert usage_of({"usage": {"accelerators": "hostile", "runs": 1}})["accelerator_seconds"] == {}


# -- through plan: a job's life, with a restart and the clean-up -------------------------------


def _job() -> Obj:
    job = restart(generic("train", ("worker", 1)), "OnFailure", limit=2)
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    job["spec"]["runPolicy"] = {"cleanUpPolicy": "All"}
    return job


def _pass(job: Obj, status: Obj | None, now: float, *objects: Obj, slim: bool = False):
    job = copy.deepcopy(job)
    if status is not None:
        job["status"] = status
    objs = [slim_for(o["kind"])(copy.deepcopy(o)) if slim else o for o in objects]
    return plan(job, Observed.of(*objs, evidence(job)), at(now))


@pytest.mark.parametrize("slim", [False, True], ids=["whole", "slim-cache"])
def test_a_life_with_a_restart_counts_each_run_once(slim):
    job = _job()
    p = _pass(job, None, 0, slim=slim)
    assert any(isinstance(a, Create) and a.kind == "Pod" for a in p.actions)
    assert "usage" not in p.status
    first = gpu_pod("train-worker-0", "run1", 5, limits={"nvidia.com/gpu": "2"})
    p = _pass(job, p.status, 6, first, slim=slim)
    assert list(p.status["usage"]["open"]) == ["run1"]
    steady = p.status
    assert _pass(job, steady, 50, first, slim=slim).status == steady  # only now moved: no new write
    failed = gpu_pod("train-worker-0", "run1", 5, 65, code=1, limits={"nvidia.com/gpu": "2"})
    p = _pass(job, steady, 66, failed, slim=slim)
    assert any(isinstance(a, Delete) and a.uid == "run1" for a in p.actions)  # the restart
    assert p.status["usage"]["accelerators"] == {"nvidia.com/gpu": 120}
    assert p.status["usage"]["wasted"] == {"nvidia.com/gpu": 120}
    restarted = p.status
    # the pod lingers while it is deleted, then is gone; its replacement runs 30 s and succeeds
    deleting = copy.deepcopy(failed)
    deleting["metadata"]["deletionTimestamp"] = ts(67)
    assert _pass(job, restarted, 67, deleting, slim=slim).status["usage"] == restarted["usage"]
    p = _pass(job, restarted, 70, slim=slim)
    second = gpu_pod("train-worker-0", "run2", 72, limits={"nvidia.com/gpu": "2"}, restarts=1)
    p = _pass(job, p.status, 73, second, slim=slim)
    assert list(p.status["usage"]["open"]) == ["run2"]
    assert p.status["usage"]["closed"] == []
    done = gpu_pod("train-worker-0", "run2", 72, 102, limits={"nvidia.com/gpu": "2"}, restarts=1)
    p = _pass(job, p.status, 103, done, slim=slim)
    assert p.status["phase"] == "Succeeded"
    usage = p.status["usage"]
    assert usage["accelerators"] == {"nvidia.com/gpu": 120 + 60}
    assert usage["wasted"] == {"nvidia.com/gpu": 120}
    assert usage["runs"] == 2
    assert usage["wallSeconds"] == 103  # startTime (the first pass) to the end
    # clean-up deletes the pod; the totals stay, pod or no pod
    after = _pass(job, p.status, 200, done, slim=slim)
    assert after.status["usage"] == usage
    assert _pass(job, after.status, 300, slim=slim).status["usage"] == usage


def test_a_job_being_deleted_records_nothing():
    job = _job()
    job["metadata"]["deletionTimestamp"] = ts(0)
    p = _pass(job, {"phase": "Running", "startTime": ts(0)}, 10, gpu_pod("train-worker-0", "run1", 5))
    assert "usage" not in p.status
