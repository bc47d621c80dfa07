"""Steps "admission" (Kueue) and "gang" (Volcano) alone."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.reconcile.steps import gates
from tests.builders import generic
from tests.unit.controller.steps.state import condition, kinds, state
from tests.unit.controller.test_plan_ascend import ascend, leader_service
from tests.unit.controller.test_plan_queueing import ADMISSION, ADMITTED, FLAVOR, PENDING, WL, queued, wl

RENDERED = {"job-worker-0": {"metadata": {"name": "job-worker-0", "annotations": {}}, "spec": {"containers": []}}}


@pytest.mark.parametrize(
    ("in_kueue", "workload", "ended", "actions", "admitted"),
    [
        (False, None, False, [], None),  # not queued: nothing to do
        (True, None, True, [("Create", "Workload", WL)], ("False", "Queueing")),
        (True, wl(PENDING), True, [], ("False", "Pending")),
        (True, wl(*ADMITTED, admission=ADMISSION), False, [], ("True", "Admitted")),
    ],
)
def test_admission(in_kueue, workload, ended, actions, admitted):
    objects = (workload, FLAVOR) if workload else (FLAVOR,)
    p = state(queued(), *objects, queueing="kueue", local_queues=("gpu",), queued=in_kueue, rendered=copy.deepcopy(RENDERED))
    p = gates.admission(p)
    assert (p.ended, kinds(p), condition(p, "Admitted")) == (ended, actions, admitted)
    if ended:
        assert p.sb.new["phase"] == "Pending"
        assert "tasks" in p.sb.new
    if admitted == ("True", "Admitted"):  # on the nodes of the flavor Kueue assigned
        assert p.rendered["job-worker-0"]["spec"]["nodeSelector"] == {"gpu": "a100"}


def test_gang_without_volcano_sends_no_pod_to_a_scheduler_that_does_not_exist():
    rendered = copy.deepcopy(RENDERED)
    rendered["job-worker-0"]["spec"]["schedulerName"] = "volcano"
    p = gates.gang(state(generic(), rendered=rendered))
    assert "schedulerName" not in p.rendered["job-worker-0"]["spec"]
    assert p.actions == []
    assert not p.ended


@pytest.mark.parametrize(("podgroup", "actions", "held"), [
    (None, [("Create", "PodGroup", "ac-uid-ac")], True),
    ({"phase": "Pending"}, [], True),
    ({"phase": "Inqueue"}, [], False),
])  # fmt: skip
def test_gang_with_volcano_holds_the_pods_until_it_takes_the_group_in(podgroup, actions, held):
    objects = [leader_service()]
    if podgroup is not None:
        objects.append({"kind": "PodGroup", "metadata": {"name": "ac-uid-ac", "uid": "pg"}, "status": podgroup})
    job = ascend(runPolicy={"schedulingPolicy": {"minAvailable": 2}})
    p = gates.gang(state(job, *objects, volcano=True, rendered=copy.deepcopy(RENDERED)))
    assert kinds(p) == actions
    assert (p.rendered == {}) is held
    assert not p.ended
    if not held:
        assert p.rendered["job-worker-0"]["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "ac-uid-ac"
