"""plan() with Kueue: the Workload a queued job owns, and no pod before it is admitted."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_t9k.controller.reconcile import Create, Delete, Observed, ReplaceStatus, plan
from airflow_t9k.controller.reconcile.queueing import release
from tests.builders import NOW, cond, generic, pod, pytorch, service
from tests.unit.controller.test_plan_ascend import ascend

W0, W1 = "job-worker-0", "job-worker-1"
WL = "genericjob-job"
GPU = {"requests": {"nvidia.com/gpu": 3}, "limits": {"nvidia.com/gpu": 3}}


def queued(queue: str = "gpu", priority: int | None = None, replicas: int = 2) -> dict:
    t9k: dict[str, Any] = {"queue": queue}
    if priority is not None:
        t9k["priority"] = priority
    job = generic("job", ("worker", replicas), scheduler={"t9kScheduler": t9k})
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = copy.deepcopy(GPU)
    return job


def wl(*conditions: tuple[str, str, str, str], admission: dict | None = None, name: str = WL) -> dict:
    status: dict[str, Any] = {"conditions": [{"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": "x"}
                                             for t, s, r, m in conditions]}  # fmt: skip
    if admission is not None:
        status["admission"] = admission
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "7"}, "status": status}  # fmt: skip


ADMISSION = {"clusterQueue": "cq", "podSetAssignments": [{"name": "worker", "count": 2, "flavors": {"nvidia.com/gpu": "a100"}}]}
ADMITTED = (("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
            ("Admitted", "True", "Admitted", "The workload is admitted"))  # fmt: skip
PENDING = (
    "QuotaReserved",
    "False",
    "Pending",
    "couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor default, 2 more needed",
)
PREEMPTED = (
    "Evicted",
    "True",
    "Preempted",
    "Preempted to accommodate a workload (UID: u) due to prioritization in the ClusterQueue",
)
FLAVOR = {
    "kind": "ResourceFlavor",
    "metadata": {"name": "a100"},
    "spec": {"nodeLabels": {"gpu": "a100"}, "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
}


def go(job: dict, *objects: dict, status: dict | None = None, mode: str = "kueue", queues: tuple[str, ...] = ("gpu",)):
    job = copy.deepcopy(job)
    if status is not None:
        job["status"] = status
    return plan(job, Observed.of(*objects, queueing=mode, local_queues=queues), NOW)


def the(p, kind: str) -> dict:
    return next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == kind)


def running_status(restarts: int = 0) -> dict:
    """What a job admitted and running has recorded."""
    p = go(queued(), wl(*ADMITTED, admission=ADMISSION), FLAVOR)
    p = go(queued(), wl(*ADMITTED, admission=ADMISSION), FLAVOR, pod(W0, restarts=restarts), pod(W1), service(W0), service(W1),
           status=p.status)  # fmt: skip
    assert p.status["phase"] == "Running"
    return p.status


# -- whether Kueue is used at all -------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "queues", "status", "uses_kueue", "why"),
    [("kueue", (), None, True, ""),
     ("auto", ("gpu",), None, True, ""),
     ("auto", (), None, False, "namespace ns has no LocalQueue 'gpu'"),
     ("auto", ("gpu",), {"phase": "Running", "conditions": [{"type": "Running", "status": "True"}]}, False,
      "the job started before its LocalQueue existed"),
     ("absent", ("gpu",), None, False, "does not serve Kueue's Workload API"),
     ("off", ("gpu",), None, False, "--queueing=off")],
    ids=["kueue", "auto-with-localqueue", "auto-without-localqueue", "auto-started-without-kueue", "absent", "off"],
)  # fmt: skip
def test_a_named_queue_goes_through_kueue_only_where_it_is_served_and_chosen(mode, queues, status, uses_kueue, why):
    p = go(queued(), status=status, mode=mode, queues=queues)
    assert (p.creates("Workload") == [WL]) is uses_kueue
    if uses_kueue:
        assert p.creates("Pod") == []
        assert cond(p, "Admitted")["status"] == "False"
    else:
        assert cond(p, "Admitted") is None
        if status is None:
            assert p.creates("Pod") == [W0, W1]
            assert why in cond(p, "QueueAdmission")["message"]


def test_a_job_without_a_queue_never_gets_a_workload():
    p = go(generic(), mode="kueue")
    assert p.creates("Workload") == []
    assert p.creates("Pod") == [W0, W1]


# -- the Workload -----------------------------------------------------------------------------


def test_the_workload_has_one_podset_per_type_with_the_pods_resources_queue_priority_and_owner():
    job = generic("job", ("ps", 1), ("worker", 3), scheduler={"t9kScheduler": {"queue": "gpu", "priority": 50}})
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]["resources"] = copy.deepcopy(GPU)
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    manifest = the(go(job), "Workload")
    assert manifest["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert manifest["spec"]["queueName"] == "gpu"
    assert manifest["spec"]["priority"] == 50
    assert [(p["name"], p["count"]) for p in manifest["spec"]["podSets"]] == [("ps", 1), ("worker", 3)]
    worker = manifest["spec"]["podSets"][1]["template"]["spec"]
    assert worker["containers"] == [{"name": "main", "image": "img", "resources": GPU}]
    assert worker["nodeSelector"] == {"zone": "a"}
    assert all("minCount" not in p for p in manifest["spec"]["podSets"])  # all or nothing
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "uid-job"
    assert manifest["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "airflow-t9k"


def test_an_elastic_job_may_be_admitted_down_to_min_replicas_and_then_runs_at_that_size():
    job = pytorch("pt", ("worker", 4), elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 4},
                  torchrunConfig={"enabled": True}, scheduler={"t9kScheduler": {"queue": "gpu"}})  # fmt: skip
    manifest = the(go(job), "Workload")
    assert manifest["spec"]["podSets"] == [{**manifest["spec"]["podSets"][0], "name": "worker", "count": 4, "minCount": 2}]
    partial = {"clusterQueue": "cq", "podSetAssignments": [{"name": "worker", "count": 2, "flavors": {}}]}
    p = go(job, wl(*ADMITTED, admission=partial, name="pytorchtrainingjob-pt"))
    assert p.creates("Pod") == ["pt-worker-0", "pt-worker-1"]


def test_an_ascendjob_queue_min_available_and_priority_class_reach_the_workload():
    policy = {"queue": "npu", "minAvailable": 2, "priorityClass": "high"}
    job = ascend("pytorch", ("Master", 1), ("Worker", 3), runPolicy={"schedulingPolicy": policy})
    wpc = {"kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000}
    manifest = the(go(job, wpc), "Workload")
    assert manifest["metadata"]["name"] == "ascendjob-ac"
    assert manifest["spec"]["queueName"] == "npu"
    assert [(p["name"], p["count"], p.get("minCount")) for p in manifest["spec"]["podSets"]] == [
        ("master", 1, None),
        ("worker", 3, 1),
    ]
    assert manifest["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    assert manifest["spec"]["priority"] == 1000
    pc = {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 7}
    assert the(go(job, pc), "Workload")["spec"]["priorityClassRef"]["group"] == "scheduling.k8s.io"


def test_an_unknown_priority_class_waits_with_a_clear_condition_and_creates_nothing():
    job = ascend("pytorch", runPolicy={"schedulingPolicy": {"queue": "npu", "priorityClass": "nope"}})
    p = go(job)
    assert p.actions == ()
    assert p.requeue_after == 10.0
    admitted = next(c for c in p.status["conditions"] if c["type"] == "Admitted")
    assert admitted["reason"] == "PriorityClassNotFound"
    assert "'nope'" in admitted["message"]


# -- waiting, admission, eviction, end ---------------------------------------------------------


def test_a_pending_workload_holds_every_pod_back_and_the_condition_carries_kueues_message():
    p = go(queued(), wl(PENDING))
    assert p.actions == ()
    assert p.status["phase"] == "Pending"
    admitted = cond(p, "Admitted")
    assert (admitted["status"], admitted["reason"], admitted["message"]) == ("False", "Pending", PENDING[3])


def test_a_workload_kueue_has_not_seen_yet_waits_too():
    p = go(queued(), wl())
    assert p.actions == ()
    assert "waiting for Kueue" in cond(p, "Admitted")["message"]


def test_admission_creates_the_pods_on_the_assigned_flavor_with_one_normal_event():
    first = go(queued(), wl(*ADMITTED, admission=ADMISSION), FLAVOR)
    assert first.creates("Pod") == [W0, W1]
    assert (cond(first, "Admitted")["status"], cond(first, "Admitted")["reason"]) == ("True", "Admitted")
    assert [(e.type, e.reason) for e in first.events if e.reason == "Admitted"] == [("Normal", "Admitted")]
    spec = the(first, "Pod")["spec"]
    assert spec["nodeSelector"] == {"gpu": "a100"}
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # The controller killed after the status write, before the pods: the next pass creates them, no second Event.
    again = go(queued(), wl(*ADMITTED, admission=ADMISSION), FLAVOR, status=first.status)
    assert again.creates("Pod") == [W0, W1]
    assert [e.reason for e in again.events if e.reason == "Admitted"] == []


def test_eviction_deletes_the_pods_without_spending_a_restart_and_the_job_waits_again():
    status = running_status(restarts=1)
    evicted = wl(*ADMITTED, PREEMPTED, admission=ADMISSION)
    p = go(queued(), evicted, pod(W0, restarts=1), pod(W1), service(W0), service(W1), status=status)
    assert sorted(p.deletes("Pod")) == [W0, W1]
    assert not [a for a in p.actions if isinstance(a, ReplaceStatus)]  # the quota goes back only once the pods are gone
    assert p.status["phase"] == "Pending"
    assert (cond(p, "Admitted")["status"], cond(p, "Admitted")["reason"]) == ("False", "Evicted")
    assert "Preempted" in cond(p, "Admitted")["message"]
    assert [t["restartCount"] for t in p.status["tasks"]] == [1]  # unchanged: an eviction is not a failure
    assert [(e.type, e.reason) for e in p.events if e.reason == "Evicted"] == [("Normal", "Evicted")]
    [entry] = p.status["restartHistory"]
    assert (entry["replica"], entry["counted"]) == ("all replicas", False)
    assert entry["cause"].startswith("Evicted by Kueue (Preempted)")
    again = go(queued(), evicted, pod(W0, restarts=1, deleting=True), pod(W1, deleting=True), status=p.status)
    assert again.status["restartHistory"] == [entry]  # the same eviction, seen again: recorded once


@pytest.mark.parametrize(("reason", "requeued"), [("Preempted", "True"), ("Deactivated", "False"), ("PodsReadyTimeout", "False")])
def test_once_the_pods_are_gone_the_reservation_is_released_as_kueue_expects(reason, requeued):
    evicted = wl(*ADMITTED, ("Evicted", "True", reason, "gone"), admission=ADMISSION)
    p = go(queued(), evicted, status=running_status())
    [write] = [a for a in p.actions if isinstance(a, ReplaceStatus)]
    assert (write.kind, write.name) == ("Workload", WL)
    assert write.body["metadata"]["resourceVersion"] == "7"  # a PUT that loses to a newer write re-plans
    assert "admission" not in write.body["status"]
    got = {c["type"]: (c["status"], c["reason"]) for c in write.body["status"]["conditions"]}
    assert got["QuotaReserved"] == ("False", "Pending")
    assert got["Admitted"] == ("False", "NoReservation")
    assert got["Requeued"] == (requeued, reason)
    assert got["Evicted"] == ("True", reason)  # Kueue flips it on the next admission
    assert p.creates("Pod") == []


def test_released_but_not_yet_readmitted_waits_with_kueues_message():
    released = release(wl(*ADMITTED, PREEMPTED, admission=ADMISSION), "Preempted", "m", NOW)
    p = go(queued(), released, status=running_status())
    assert p.actions == ()
    assert cond(p, "Admitted")["status"] == "False"


def test_the_end_of_the_job_marks_the_workload_finished_once():
    job = queued()
    job["spec"]["successRules"] = [{"worker": [0]}]
    admitted = wl(*ADMITTED, admission=ADMISSION)
    done = go(job, admitted, pod(W0, "Succeeded", 0), pod(W1), service(W0), service(W1), status=running_status())
    assert done.status["phase"] == "Succeeded"
    [write] = [a for a in done.actions if isinstance(a, ReplaceStatus)]
    finished = next(c for c in write.body["status"]["conditions"] if c["type"] == "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    # A pass after a lost write writes it again; after it landed, nothing more.
    assert [a for a in go(job, admitted, status=done.status).actions if isinstance(a, ReplaceStatus)]
    assert not [a for a in go(job, write.body, status=done.status).actions if isinstance(a, ReplaceStatus)]


def test_pause_gives_the_quota_back_and_resume_queues_again():
    paused_job = queued()
    paused_job["spec"]["runMode"] = {"pause": {"enabled": True}}
    p = go(paused_job, wl(*ADMITTED, admission=ADMISSION), pod(W0), pod(W1), status=running_status())
    assert sorted(p.deletes("Pod")) == [W0, W1]
    assert p.deletes("Workload") == [WL]
    resumed = go(queued(), status=p.status)
    assert resumed.creates("Workload") == [WL]
    assert resumed.creates("Pod") == []


def test_a_finished_workload_of_a_running_job_is_replaced():
    p = go(queued(), wl(*ADMITTED, ("Finished", "True", "Succeeded", "x"), admission=ADMISSION), pod(W0), status=running_status())
    assert p.deletes("Workload") == [WL]
    assert p.deletes("Pod") == [W0]


def test_pods_found_without_admission_are_deleted():
    p = go(queued(), wl(PENDING), pod(W0), status=running_status())
    assert p.deletes("Pod") == [W0]
    assert p.creates("Pod") == []
    assert not [a for a in p.actions if isinstance(a, Delete) and a.kind == "Workload"]


def test_ascendjob_reports_admitted_in_its_kubeflow_status_and_drops_the_not_enforced_warning():
    job = ascend("pytorch", runPolicy={"schedulingPolicy": {"queue": "npu"}})
    p = go(job, queues=("npu",))
    admitted = next(c for c in p.status["conditions"] if c["type"] == "Admitted")
    assert admitted["status"] == "False"
    assert "GangSchedulingNotEnforced" not in [e.reason for e in p.events]
    assert p.creates("Workload") == ["ascendjob-ac"]


# -- seeds 001/003: t9kScheduler's defaults (queue "default", priority 50) -------------------


def _labels(p, name: str) -> tuple[str | None, str | None]:
    meta = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod" and a.name == name)["metadata"]
    return meta["labels"].get("scheduler.tensorstack.dev/queue"), meta["annotations"].get("scheduler.tensorstack.dev/priority")


@pytest.mark.parametrize(
    ("t9k", "queues", "workload_queue", "priority"),
    [({}, ("default",), "default", 50),
     ({"priority": 7}, ("default",), "default", 7),
     ({"queue": "gpu"}, ("gpu",), "gpu", 50),
     ({}, (), None, None)],
    ids=["empty-goes-to-default-at-50", "own-priority", "own-queue-default-priority", "no-localqueue-default"],
)  # fmt: skip
def test_t9k_scheduler_defaults_to_queue_default_and_priority_50(t9k, queues, workload_queue, priority):
    job = generic("job", ("worker", 2), scheduler={"t9kScheduler": t9k})
    p = go(job, mode="auto", queues=queues)
    if workload_queue is None:  # no LocalQueue "default": recorded on the pods, as the seed's scheduler would read them
        assert p.creates("Workload") == []
        assert _labels(p, W0) == ("default", "50")
        assert "queue 'default', priority 50" in cond(p, "QueueAdmission")["message"]
        return
    spec = the(p, "Workload")["spec"]
    assert (spec["queueName"], spec["priority"]) == (workload_queue, priority)


def test_a_job_without_t9k_scheduler_uses_the_default_scheduler_even_with_a_default_localqueue():
    p = go(generic("job", ("worker", 2)), mode="auto", queues=("default",))  # seed 001: no spec.scheduler, no queue
    assert p.creates("Workload") == []
    assert p.creates("Pod") == [W0, W1]
    assert _labels(p, W0) == (None, None)


def test_colossalai_puts_only_its_workers_in_the_queue_as_seed_003_says():
    from tests.builders import colossal

    job = colossal(scheduler={"t9kScheduler": {"queue": "gpu", "priority": 50}})
    spec = the(go(job, mode="auto"), "Workload")["spec"]
    assert [ps["name"] for ps in spec["podSets"]] == ["worker"]
    admitted = wl(*ADMITTED, admission={"clusterQueue": "cq", "podSetAssignments": [{"name": "worker", "count": 2}]},
                  name="colossalaijob-cai")  # fmt: skip
    first = go(job, admitted, mode="auto")
    p = go(job, admitted, *(service(f"cai-worker-{i}") for i in range(2)), mode="auto", status=first.status)
    assert sorted(p.creates("Pod")) == ["cai-launcher", "cai-worker-0", "cai-worker-1"]
    assert _labels(p, "cai-worker-0") == ("gpu", "50")
    assert _labels(p, "cai-launcher") == (None, None)
