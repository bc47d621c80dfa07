"""Gang scheduling with no add-on (issue 30, item 4): the job's PodGroup in Kubernetes' own
Workload API, which pods join it, and the Kueue and Volcano cases it stays out of."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from airflow_t9k.api.paths import GANG_GROUP, child_kind, child_path
from airflow_t9k.controller.reconcile import Create, Observed, plan
from airflow_t9k.controller.reconcile.gang import gate, min_count, podgroup
from airflow_t9k.kinds.registry import get_kind
from tests.builders import NOW, generic, pod, pytorch
from tests.unit.controller.test_plan_ascend import ascend
from tests.unit.controller.test_plan_queueing import ADMISSION, ADMITTED, FLAVOR, queued, wl

SERVED = Observed(gang_problem=None)
GROUP = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "genericjob-job", "uid": "g"}}


def bound(name: str) -> dict:
    p = pod(name)
    p["spec"] = {"nodeName": "kwok-node-0"}
    return p


def rendered(*names: str) -> dict:
    return {n: {"metadata": {"name": n}, "spec": {}} for n in names}


@pytest.mark.parametrize(
    ("observed", "queued_", "pods", "creates", "joined", "hold"),
    [
        (SERVED, False, 2, True, True, False),  # the first placement: the group, and both pods in it
        (replace(SERVED, gangs={"genericjob-job": GROUP}), False, 2, False, True, False),
        (replace(SERVED, pods={"job-worker-1": bound("job-worker-1")}), False, 2, True, False, False),  # a replacement
        (replace(SERVED, pods={"job-worker-1": pod("job-worker-1")}), False, 2, True, True, False),  # none bound yet
        (replace(SERVED, gangs={"genericjob-job": {**GROUP, "metadata": {**GROUP["metadata"], "deletionTimestamp": "t"}}}),
         False, 2, False, False, True),  # a group being deleted: no pod may name it
        (SERVED, True, 2, False, False, False),  # Kueue admits it whole
        (SERVED, False, 1, False, False, False),  # one pod: no gang
        (Observed(), False, 2, False, False, False),  # not served here
    ],
)  # fmt: skip
def test_gate(observed, queued_, pods, creates, joined, hold):
    job = generic()
    got = rendered("job-worker-0", "job-worker-1")
    actions, held = gate(get_kind("GenericJob"), job, observed, queued_, pods, got)
    assert [a.kind for a in actions if isinstance(a, Create)] == ([GANG_GROUP] if creates else [])
    assert held is hold
    for p in got.values():
        assert ("schedulingGroup" in p["spec"]) is joined
        if joined:
            assert p["spec"]["schedulingGroup"] == {"podGroupName": "genericjob-job"}


@pytest.mark.parametrize(
    ("job", "pods", "count"),
    [
        (generic(), 2, 2),
        (pytorch(elastic={"enabled": True, "minReplicas": 2, "maxReplicas": 4}, torchrunConfig={"enabled": True}), 3, 2),
        (ascend(), 3, 3),
    ],
)  # fmt: skip
def test_min_count(job, pods, count):
    assert min_count(get_kind(job["kind"]), job, pods) == count


def test_an_ascendjobs_min_available_is_the_gangs_minimum():
    job = ascend()
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 2}}
    assert min_count(get_kind("AscendJob"), job, 3) == 2


def test_the_podgroup_and_where_it_goes():
    group = podgroup(generic(), 2)
    assert group["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}
    assert group["metadata"]["ownerReferences"][0]["name"] == "job"
    assert child_kind(group) == GANG_GROUP
    assert child_path(GANG_GROUP, "ns") == "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups"
    assert child_kind({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"}) == "PodGroup"
    seen = Observed.of(copy.deepcopy(group) | {"metadata": {"name": "genericjob-job"}}, pod("job-worker-0"))
    assert list(seen.gangs) == ["genericjob-job"]
    assert not seen.podgroups


def test_a_first_pass_makes_the_group_and_its_pods_name_it():
    p = plan(generic(), SERVED, NOW)
    creates = [a for a in p.actions if isinstance(a, Create)]
    assert [a.kind for a in creates if a.kind == GANG_GROUP] == [GANG_GROUP]
    pods = [a.manifest for a in creates if a.kind == "Pod"]
    assert len(pods) == 2
    assert all(m["spec"]["schedulingGroup"] == {"podGroupName": "genericjob-job"} for m in pods)
    assert p.status["scheduling"]["effect"] == "GangOnly"


def test_a_queued_job_gets_no_podgroup():
    observed = replace(Observed.of(wl(*ADMITTED, admission=ADMISSION), FLAVOR, queueing="kueue", local_queues=("gpu",)),
                       gang_problem=None)  # fmt: skip
    p = plan(queued(), observed, NOW)
    assert not [a for a in p.actions if isinstance(a, Create) and a.kind == GANG_GROUP]
    assert all("schedulingGroup" not in a.manifest["spec"] for a in p.actions if isinstance(a, Create) and a.kind == "Pod")
    assert p.status["scheduling"]["effect"] == "EnforcedByKueue"


def test_the_schedulers_verdict_on_the_gang_is_in_the_jobs_status():
    verdict = {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
               "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}  # fmt: skip
    group = {**GROUP, "status": {"conditions": [verdict]}}
    p = plan(generic(), replace(SERVED, gangs={"genericjob-job": group}), NOW)
    assert p.status["scheduling"]["placement"] == "Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


@pytest.mark.parametrize(("policy", "warned"), [({"minAvailable": 2}, False), ({"minAvailable": 2, "queue": "npu"}, True)])
def test_an_ascendjobs_gang_warning_says_only_what_is_not_enforced(policy, warned):
    job = ascend()
    job["spec"]["runPolicy"] = {"schedulingPolicy": policy}
    p = plan(job, SERVED, NOW)
    events = [e for e in p.events if e.reason == "GangSchedulingNotEnforced"]
    assert bool(events) is warned
    if warned:
        assert "kube-scheduler's gang" in events[0].message
        assert "the queue is only a pod label" in events[0].message
    assert p.status["scheduling"]["effect"] == "GangOnly"
