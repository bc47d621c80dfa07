"""In-place restarts (issue 30, item 1): the pod built for them, how a pass reads the kubelet's
restart, what it writes, the group restart, and the choice of strategy. Tables of cases; the
kubelet itself is exercised on the real node (tests/real/test_inplace_real.py)."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.reconcile import Observed, Patch, plan
from airflow_t9k.controller.reconcile.inplace import (
    AGENT,
    AGENT_EXIT,
    ANNOTATION_AUTHORIZED,
    ANNOTATION_GROUP,
    GATE,
    equip,
    equipped,
    pending,
    rules,
)
from airflow_t9k.controller.reconcile.steps import act, strategy
from airflow_t9k.kinds.base import ANNOTATION_RESTARTS, RestartPolicy
from airflow_t9k.kinds.registry import get_kind
from tests.builders import NOW, colossal, generic, pod, restart
from tests.unit.controller.steps.state import kinds, state

W0, W1 = "job-worker-0", "job-worker-1"
EVICTED = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "message": "drained"}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (RestartPolicy("Never", 0), []),
        (RestartPolicy("OnFailure", 0), []),  # no restart left to give
        (RestartPolicy("OnFailure", 3), [("NotIn", [0])]),
        (RestartPolicy("ExitCode", 3), [("In", [130, 137, 138, 143])]),
        (RestartPolicy("ExitCode", 3, retry_any_signal=True), [("NotIn", list(range(128)))]),
        (RestartPolicy("Always", 3), [("In", [0]), ("NotIn", [0])]),
    ],
)
def test_the_main_containers_rules_follow_the_replicas_policy(policy, expected):
    got = rules(policy)
    assert all(r["action"] == "RestartAllContainers" for r in got)
    assert [(r["exitCodes"]["operator"], r["exitCodes"]["values"]) for r in got] == expected


ON_FAILURE = RestartPolicy("OnFailure", 3)


def built(policy: RestartPolicy = ON_FAILURE, image: str | None = None, **container) -> dict:
    p = {"metadata": {"name": "job-worker-0"}, "spec": {"containers": [{"name": "main", "image": "img:1", **container}],
                                                         "initContainers": [{"name": "mine", "image": "x"}]}}  # fmt: skip
    equip(get_kind("GenericJob"), p, policy, image)
    return p


def test_equip_adds_the_gate_the_agent_and_their_volumes_before_the_pods_own_init_containers():
    p = built(securityContext={"runAsUser": 1000}, imagePullPolicy="Never")
    gate, agent, mine = p["spec"]["initContainers"]
    assert (gate["name"], agent["name"], mine["name"]) == (GATE, AGENT, "mine")
    assert "restartPolicy" not in gate  # a regular init container: it runs again at every in-place restart
    assert agent["restartPolicy"] == "Always"  # a sidecar
    assert agent["restartPolicyRules"] == [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [AGENT_EXIT]}}
    ]
    for c in (gate, agent):
        assert c["image"] == "img:1"
        assert c["securityContext"] == {"runAsUser": 1000}
        assert c["imagePullPolicy"] == "Never"
        assert c["resources"]["requests"] == c["resources"]["limits"]
        assert c["command"][:2] == ["sh", "-c"]
    main = p["spec"]["containers"][0]
    assert main["restartPolicy"] == "Never"
    assert main["restartPolicyRules"][0]["exitCodes"] == {"operator": "NotIn", "values": [0]}
    volumes = {v["name"]: v for v in p["spec"]["volumes"]}
    assert volumes["t9k-restart"]["emptyDir"]["medium"] == "Memory"
    assert volumes["t9k-restart-info"]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] == (
        f"metadata.annotations['{ANNOTATION_AUTHORIZED}']"
    )
    assert equipped(p)


def test_an_agent_image_replaces_the_main_containers_and_never_replicas_get_no_rules():
    p = built(RestartPolicy("Never", 0), image="busybox:1.36", imagePullPolicy="Never")
    assert {c["image"] for c in p["spec"]["initContainers"][:2]} == {"busybox:1.36"}
    assert "imagePullPolicy" not in p["spec"]["initContainers"][0]  # the main container's is for its image
    assert "restartPolicyRules" not in p["spec"]["containers"][0]
    assert equipped(p)  # still restartable in place as part of a group


def inplace_pod(name: str = W0, *, phase: str = "Running", count: int = 0, allowed: int | None = None,
                state_: dict | None = None, last: dict | None = None, restarts: int = 0) -> dict:  # fmt: skip
    p = built()
    p["kind"] = "Pod"
    p["metadata"] = {"name": name, "uid": f"uid-{name}", "annotations": {ANNOTATION_RESTARTS: str(restarts)},
                     "labels": {"batch.tensorstack.dev/replica-type": "worker"}}  # fmt: skip
    if allowed is not None:
        p["metadata"]["annotations"][ANNOTATION_AUTHORIZED] = str(allowed)
    cs = {"name": "main", "restartCount": count, "state": state_ or {"running": {}}}
    if last:
        cs["lastState"] = {"terminated": last}
    p["status"] = {"phase": phase, "containerStatuses": [cs]}
    return p


ERROR = {"exitCode": 3, "reason": "Error", "finishedAt": "2026-11-25T11:59:00Z"}
KUBELET = {"exitCode": 137, "reason": "RestartingAllContainers"}
WAITING = {"waiting": {"reason": "RestartingAllContainers"}}


@pytest.mark.parametrize(
    ("p", "code"),
    [
        (inplace_pod(), None),  # running
        (inplace_pod(state_={"terminated": ERROR}), 3),  # exited with a code its rules restart: the restart begins
        (inplace_pod(state_={"terminated": {"exitCode": 0}}), None),  # OnFailure: 0 ends the pod, no restart
        (inplace_pod(state_=WAITING, count=1, last=ERROR), 3),  # restarted, held at the gate: the code kept
        (inplace_pod(state_=WAITING, count=1, last=KUBELET), 137),  # only the kubelet's own record is left
        (inplace_pod(state_=WAITING, count=1, allowed=1, last=ERROR), None),  # allowed already: the gate lets it run
        (inplace_pod(state_={"terminated": ERROR}, allowed=1), None),  # allowed before the kubelet restarted it
        (inplace_pod(phase="Failed", state_={"terminated": ERROR}), None),  # ended: no restart in place coming
        (pod(W0, "Running"), None),  # not built for in-place restarts
    ],
)  # fmt: skip
def test_pending_reads_the_kubelets_restart(p, code):
    view = pending(p)
    if code is None:
        assert view is None
        return
    assert view["status"]["phase"] == "Failed"
    assert view["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code
    assert p["status"]["phase"] != "Failed"  # the observed pod is left as it is


def job(limit: int = 2) -> dict:
    return restart(generic(), "OnFailure", limit)


def patches(p) -> list[tuple[str, dict]]:
    return [(a.name, a.body["metadata"]["annotations"]) for a in p.actions if isinstance(a, Patch)]


def test_a_restart_the_kubelet_holds_is_counted_then_allowed_by_a_patch_not_a_delete():
    held = inplace_pod(state_=WAITING, count=1, last=ERROR)
    p = act.replicas(state(job(), held, inplace_pod(W1), in_place=True))
    assert p.sb.new["restartHistory"][0] == {
        "time": "2026-11-25T12:00:00Z", "replica": W0, "cause": "failed with container main exit code 3 (Error)",
        "counted": True, "podUID": "uid-job-worker-0/in-place/1", "exitCode": 3, "inPlace": True,
    }  # fmt: skip
    assert patches(p) == [(W0, {ANNOTATION_AUTHORIZED: "1", ANNOTATION_RESTARTS: "1"})]
    assert [a for a in kinds(p) if a[0] == "Delete"] == []
    assert "restarting in place (1/2, policy OnFailure)" in p.events[0].message


def test_a_decision_on_record_whose_patch_was_lost_is_patched_again_and_counted_once():
    held = inplace_pod(state_=WAITING, count=1, last=ERROR)
    status = {"tasks": [{"type": "worker", "status": [{"name": W0, "restartCount": 1}, {"name": W1, "restartCount": 0}]}],
              "restartHistory": [{"podUID": "uid-job-worker-0/in-place/1", "replica": W0, "counted": True}]}  # fmt: skip
    p = act.replicas(state(job(), held, inplace_pod(W1), status=status, in_place=True))
    assert patches(p) == [(W0, {ANNOTATION_AUTHORIZED: "1", ANNOTATION_RESTARTS: "1"})]
    assert len(p.sb.new["restartHistory"]) == 1
    assert p.events == []


def test_no_restart_left_leaves_the_pod_held_and_the_replica_failed():
    held = inplace_pod(state_=WAITING, count=3, allowed=2, last=ERROR, restarts=2)
    j = job(limit=2)
    result = plan(j, Observed.of(held, inplace_pod(W1)), NOW)
    assert not [a for a in result.actions if isinstance(a, Patch)]
    assert result.status["phase"] == "Failed"  # GenericJob's default failure rule: a replica failed for good
    [entry] = [e for t in result.status["tasks"] for e in t["status"] if e["name"] == W0]
    assert (entry["phase"], entry["restartCount"]) == ("Failed", 2)


def test_a_fixed_world_group_restarts_in_place_but_its_disrupted_pod_is_recreated():
    def cai(name: str, evicted: bool = False, asked: str | None = None) -> dict:
        p = inplace_pod(name)
        p["metadata"]["labels"]["batch.tensorstack.dev/replica-type"] = name.split("-")[1]
        if evicted:
            p["status"]["phase"] = "Failed"
            p["status"]["conditions"] = [EVICTED]
        if asked:
            p["metadata"]["annotations"][ANNOTATION_GROUP] = asked
        return p

    objects = (cai("cai-launcher-0"), cai("cai-worker-0"), cai("cai-worker-1", evicted=True))
    p = state(colossal(workers=2), *objects, in_place=True)
    p.group_cause = next(s for s in p.states if s.slot.pod_name == "cai-worker-1")
    p = act.group_restart(p)
    assert [k for k in kinds(p) if k[0] == "Delete"] == [("Delete", "Pod", "cai-worker-1")]
    assert patches(p) == [("cai-launcher-0", {ANNOTATION_AUTHORIZED: "1", ANNOTATION_GROUP: "uid-cai-worker-1"}),
                          ("cai-worker-0", {ANNOTATION_AUTHORIZED: "1", ANNOTATION_GROUP: "uid-cai-worker-1"})]  # fmt: skip
    [entry] = p.sb.new["restartHistory"]
    assert (entry["replica"], entry["counted"], entry.get("inPlace")) == ("cai-worker-1 (whole group)", False, True)
    assert "2 in place" in p.events[0].message
    # The same disruption seen again: the pods already asked are not asked twice.
    again = (cai("cai-launcher-0", asked="uid-cai-worker-1"), cai("cai-worker-0", asked="uid-cai-worker-1"),
             cai("cai-worker-1", evicted=True))  # fmt: skip
    q = state(colossal(workers=2), *again, status={"restartHistory": copy.deepcopy(p.sb.new["restartHistory"])}, in_place=True)
    q.group_cause = next(s for s in q.states if s.slot.pod_name == "cai-worker-1")
    q = act.group_restart(q)
    assert patches(q) == []
    assert q.events == []


@pytest.mark.parametrize(
    ("asked", "problem", "kept", "decided", "warned"),
    [
        (None, None, None, "InPlace", False),  # Auto, where the cluster offers it
        (None, "nodes lack it", None, "Recreate", False),
        ("InPlace", "nodes lack it", None, "Recreate", True),
        ("Recreate", None, None, "Recreate", False),
        ("InPlace", None, None, "InPlace", False),
        (None, None, {"strategy": "Recreate", "reason": "r"}, "Recreate", False),  # decided once, kept
        (None, "gone", {"strategy": "InPlace", "reason": "r"}, "InPlace", False),
    ],
)  # fmt: skip
def test_the_strategy_is_decided_once(asked, problem, kept, decided, warned):
    j = generic(**({"restartStrategy": asked} if asked else {}))
    observed = Observed(in_place_problem=problem)
    p = strategy.strategy(state(j, status={"restartStrategy": kept} if kept else None, observed=observed))
    assert p.sb.new["restartStrategy"]["strategy"] == decided
    assert p.in_place is (decided == "InPlace")
    assert [e.reason for e in p.events] == (["InPlaceRestartUnavailable"] if warned else [])
    if problem and not kept:
        assert problem in p.sb.new["restartStrategy"]["reason"]


def test_new_pods_are_built_for_in_place_restarts_except_in_debug_mode():
    observed = Observed(in_place_problem=None)
    first = plan(job(), observed, NOW)
    created = [a.manifest for a in first.actions if getattr(a, "kind", "") == "Pod"]
    assert created
    assert all(equipped(m) for m in created)
    assert first.status["restartStrategy"]["strategy"] == "InPlace"
    debug = plan(generic(runMode={"debug": {"enabled": True}}), observed, NOW)
    assert not any(equipped(a.manifest) for a in debug.actions if getattr(a, "kind", "") == "Pod")
    recreate = plan(job(), Observed(), NOW)  # not detected: recreated, as before
    assert not any(equipped(a.manifest) for a in recreate.actions if getattr(a, "kind", "") == "Pod")
    assert recreate.status["restartStrategy"]["strategy"] == "Recreate"


FELL = {"terminated": {"exitCode": 205, "reason": "Error", "finishedAt": "2026-11-25T11:59:00Z"}}


@pytest.mark.parametrize(
    ("asked", "phase", "count", "allowed", "expected"),
    [
        ("uid-w1", "Failed", 0, 1, "uid-w1"),  # asked, ended before its agent could restart it
        ("uid-w1", "Succeeded", 0, 1, "uid-w1"),
        ("uid-w1", "Failed", 1, 1, None),  # it did restart in place: this end is its own
        ("uid-w1", "Running", 0, 1, None),  # still running: the agent will restart it
        (None, "Failed", 0, None, None),  # never asked: a failure like any other
    ],
)  # fmt: skip
def test_a_pod_that_ended_before_its_group_restart_reached_it_is_overtaken(asked, phase, count, allowed, expected):
    from airflow_t9k.controller.reconcile.disruption import overtaken

    p = inplace_pod(phase=phase, count=count, allowed=allowed, state_=FELL if phase != "Running" else None)
    if asked:
        p["metadata"]["annotations"][ANNOTATION_GROUP] = asked
    assert overtaken(p) == expected


def test_a_launcher_that_fell_before_its_in_place_restart_is_recreated_and_the_job_goes_on():
    """The real node's case: an evicted MPI worker's orted dies, mpirun exits 205 at once, before the
    request to restart in place reaches the launcher's agent. The launcher is part of the group
    restart already on record: recreated, no second entry, nobody asked twice, the job not failed."""
    from tests.unit.controller.test_plan_mpi import mpi

    def member(name: str, rtype: str, **kw) -> dict:
        p = inplace_pod(name, **kw)
        p["metadata"]["labels"]["batch.tensorstack.dev/replica-type"] = rtype
        p["metadata"]["annotations"][ANNOTATION_GROUP] = "uid-m-worker-1"
        return p

    history = [{"time": "2026-11-25T11:58:00Z", "replica": "m-worker-1 (whole group)", "cause": "EvictionByEvictionAPI",
                "counted": False, "podUID": "uid-m-worker-1", "inPlace": True}]  # fmt: skip
    job = mpi(workers=2, restartStrategy="InPlace")
    job["status"] = {"restartHistory": history, "restartStrategy": {"strategy": "InPlace", "reason": "asked"}}
    fell = member("m-launcher", "launcher", phase="Failed", count=0, allowed=1, state_=FELL)
    result = plan(job, Observed.of(fell, member("m-worker-0", "worker", allowed=1)), NOW)
    assert result.status["phase"] not in ("Failed", "Succeeded"), result.status
    assert [(a.kind, a.name) for a in result.actions if type(a).__name__ == "Delete"] == [("Pod", "m-launcher")]
    assert not [a for a in result.actions if isinstance(a, Patch) and a.kind == "Pod"]
    assert result.status["restartHistory"] == history
