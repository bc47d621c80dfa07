"""plan() for AscendJob gang scheduling: a Volcano PodGroup where Volcano is served (as
MindCluster's operator creates it), Kueue where the job is queued, and otherwise no pod sent
to a scheduler that does not exist."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.reconcile import Create, Observed, plan
from airflow_t9k.kinds.ascend_gang import quantity
from tests.builders import NOW
from tests.unit.controller.test_plan_ascend import apod, ascend, leader_service

PG = "ac-uid-ac"  # <job>-<uid>, the operator's name


def go(job: dict, *objects: dict, volcano: bool = True, status: dict | None = None, **kw):
    job = copy.deepcopy(job)
    if status is not None:
        job["status"] = status
    return plan(job, Observed.of(*objects, volcano=volcano, **kw), NOW)


def podgroup(phase: str | None) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": PG, "uid": "uid-pg"},
            "status": {"phase": phase} if phase is not None else {}}  # fmt: skip


def pods_of(p) -> dict[str, dict]:
    return {a.name: a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod"}


def test_the_podgroup_is_created_first_with_the_jobs_labels_and_the_gang():
    job = ascend(runPolicy={"schedulingPolicy": {"minAvailable": 2, "queue": "npu", "priorityClass": "high"}})
    job["metadata"]["annotations"] = {"team": "a"}
    p = go(job, leader_service())
    created = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "PodGroup")
    assert created["metadata"]["name"] == PG
    assert created["metadata"]["labels"]["framework"] == "pytorch"
    assert created["metadata"]["annotations"] == {"team": "a"}
    assert created["metadata"]["ownerReferences"][0]["uid"] == "uid-ac"
    # The leader and one worker: 2 pods of 2 NPUs each.
    assert created["spec"] == {"minMember": 2, "queue": "npu", "priorityClassName": "high",
                               "minResources": {"huawei.com/Ascend910": "4"}}  # fmt: skip
    assert pods_of(p) == {}


@pytest.mark.parametrize(("phase", "pods"), [(None, 0), ("Pending", 0), ("Inqueue", 3), ("Running", 3)])
def test_pods_wait_until_volcano_takes_the_group_in(phase, pods):
    p = go(ascend(), leader_service(), podgroup(phase))
    created = pods_of(p)
    assert len(created) == pods
    for pod in created.values():
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == PG
        assert pod["spec"]["schedulerName"] == "volcano"


def test_the_podgroup_goes_when_the_job_ends():
    status = go(ascend(), leader_service(), podgroup("Running"),
                *(apod(n) for n in ("ac-master-0", "ac-worker-0", "ac-worker-1")),
                status={"conditions": [{"type": "Created", "status": "True"}]}).status  # fmt: skip
    p = go(ascend(), leader_service(), podgroup("Running"), apod("ac-master-0"), apod("ac-worker-0"),
           apod("ac-worker-1", "Failed", 1),
           status=status)  # fmt: skip
    assert p.deletes("PodGroup") == [PG]


def test_kueue_admits_the_gang_instead_of_a_podgroup():
    job = ascend(runPolicy={"schedulingPolicy": {"queue": "npu"}})
    p = go(job, leader_service(), queueing="auto", local_queues=("npu",))
    assert p.creates("Workload") == ["ascendjob-ac"]
    assert p.creates("PodGroup") == []


def test_without_volcano_no_pod_is_stranded_on_a_missing_scheduler_and_the_job_says_so():
    job = ascend(schedulerName="volcano", runPolicy={"schedulingPolicy": {"minAvailable": 3}})
    p = go(job, leader_service(), volcano=False)
    assert p.creates("PodGroup") == []
    for pod in pods_of(p).values():
        assert "schedulerName" not in pod["spec"]
    warning = next(e for e in p.events if e.reason == "GangSchedulingNotEnforced")
    assert "serves no Volcano PodGroups" in warning.message
    assert "go to the default scheduler" in warning.message


def test_another_scheduler_is_left_as_the_user_asked():
    pods = pods_of(go(ascend(schedulerName="my-scheduler"), leader_service(), volcano=False))
    assert {p["spec"]["schedulerName"] for p in pods.values()} == {"my-scheduler"}


@pytest.mark.parametrize(("text", "value"), [("500m", "0.5"), ("2Gi", str(2 * 2**30)), (8, "8"), ("1.5", "1.5"), ("1k", "1000")])
def test_quantities(text, value):
    assert quantity(text) == quantity(value)


def test_min_available_out_of_range_is_refused():
    p = go(ascend(runPolicy={"schedulingPolicy": {"minAvailable": 9}}), leader_service())
    failed = next(c for c in p.status["conditions"] if c["type"] == "Failed")
    assert "minAvailable must be an integer in 1..3" in failed["message"]
