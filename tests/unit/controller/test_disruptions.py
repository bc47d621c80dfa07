"""Disruptions are not failures (issue 23, point 1): the pure core's decisions, by table."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_t9k.controller.reconcile import Create, Delete
from airflow_t9k.controller.reconcile.disruption import HISTORY_LIMIT, disruption
from tests.builders import colossal, cond, generic, pod, pytorch, restart, run, service

Obj = dict[str, Any]


def disrupted(name: str, how: str, deleting: bool = False) -> Obj:
    """A pod as the cluster leaves it after each kind of disruption."""
    p = pod(name, "Running", deleting=deleting)
    status = p["status"]
    if how == "kubelet":  # node pressure: the kubelet fails the pod itself
        status.update(phase="Failed", reason="Evicted", message="The node was low on resource: memory.")
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]
    elif how == "kubelet-old":  # a kubelet from before DisruptionTarget: only the reason says it
        status.update(phase="Failed", reason="Evicted", message="Pod ephemeral local storage usage exceeds the total limit.")
    elif how == "eviction-api":
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                                 "message": "Eviction API: evicting"}]  # fmt: skip
    elif how == "preempted":
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    elif how == "node-gone":  # PodGC after the node was deleted
        status.update(phase="Failed")
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}]
    return p


@pytest.mark.parametrize(
    ("pod_", "cause"),
    [
        (disrupted("j-worker-0", "kubelet"), "TerminationByKubelet"),
        (disrupted("j-worker-0", "kubelet-old"), "Evicted"),
        (disrupted("j-worker-0", "eviction-api", deleting=True), "EvictionByEvictionAPI"),
        (disrupted("j-worker-0", "preempted", deleting=True), "PreemptionByScheduler"),
        (disrupted("j-worker-0", "node-gone", deleting=True), "DeletionByPodGC"),
        ({"status": {"phase": "Failed", "reason": "NodeLost"}}, "NodeLost"),
        (pod("j-worker-0", "Failed", 1), None),
        (pod("j-worker-0", "Failed", 137, reason="OOMKilled"), None),
        (pod("j-worker-0", "Running", deleting=True), None),  # our own delete, or a user's
        ({"status": {"phase": "Running", "reason": "Evicted"}}, None),  # only a failed pod was evicted
        ({"status": {"conditions": [{"type": "DisruptionTarget", "status": "False", "reason": "X"}]}}, None),
        (None, None),
    ],
    ids=["kubelet", "kubelet-no-condition", "eviction-api", "preempted", "node-gone", "node-lost", "exit-1", "oom",
         "plain-delete", "running-evicted-reason", "condition-false", "no-pod"],
)  # fmt: skip
def test_what_counts_as_a_disruption(pod_, cause):
    assert disruption(pod_) == cause


def _history(p) -> list[Obj]:
    return p.status.get("restartHistory") or []


def _job(kind: str, policy: str) -> Obj:
    if kind == "GenericJob":
        return restart(generic("j"), policy, 1)
    job = pytorch("j", ("worker", 2), policy=policy, runPolicy={"backoffLimit": 1})
    return job


@pytest.mark.parametrize("how", ["kubelet", "kubelet-old"])
@pytest.mark.parametrize(("kind", "policy"),
                         [("GenericJob", "Never"), ("GenericJob", "OnFailure"), ("PyTorchTrainingJob", "ExitCode"),
                                              ("PyTorchTrainingJob", "Never")])  # fmt: skip
def test_an_evicted_replica_is_replaced_without_spending_a_restart(how, kind, policy):
    p = run(_job(kind, policy), disrupted("j-worker-0", how), pod("j-worker-1"), status={"phase": "Running"})
    assert p.status["phase"] == "Running"
    assert [a.name for a in p.actions if isinstance(a, Delete)] == ["j-worker-0"]
    entry = next(e for t in p.status["tasks"] for e in t["status"] if e["name"] == "j-worker-0")
    assert entry["restartCount"] == 0
    [h] = _history(p)
    assert h["replica"] == "j-worker-0"
    assert h["counted"] is False
    assert h["podUID"] == "uid-j-worker-0"
    assert h["cause"].startswith(disruption(disrupted("j-worker-0", how)) + ": ")
    assert any(e.reason == "ReplicaDisrupted" for e in p.events)
    # Not a replica failure either.
    failure = cond(p, "ReplicaFailure")
    assert failure is None or failure["status"] == "False"


def test_a_pod_taken_by_the_eviction_api_is_recorded_once_and_left_to_go():
    job = generic("j")
    evicting = disrupted("j-worker-0", "eviction-api", deleting=True)
    first = run(job, evicting, pod("j-worker-1"), status={"phase": "Running"})
    assert not [a for a in first.actions if isinstance(a, (Delete, Create)) and a.kind == "Pod"]
    assert [h["cause"] for h in _history(first)] == ["EvictionByEvictionAPI: Eviction API: evicting"]
    # A repeated pass (the write conflicted, or the controller restarted) adds nothing.
    again = run(job, evicting, pod("j-worker-1"), status=first.status)
    assert _history(again) == _history(first)
    assert not [e for e in again.events if e.reason == "ReplicaDisrupted"]
    # Gone: created again under the same count.
    back = run(job, pod("j-worker-1"), status=again.status)
    created = [a for a in back.actions if isinstance(a, Create) and a.kind == "Pod" and a.name == "j-worker-0"]
    assert created
    assert created[0].manifest["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "0"


def test_a_disruption_never_fails_a_job_whose_policy_is_never():
    # Before: an evicted replica with restartPolicy Never failed the whole job.
    job = restart(generic("j", ("worker", 1)), "Never")
    p = run(job, disrupted("j-worker-0", "kubelet"), status={"phase": "Running"})
    assert p.status["phase"] == "Running"


def test_counted_restarts_are_in_the_history_too_with_their_exit_code():
    job = restart(generic("j"), "OnFailure", 3)
    p = run(job, pod("j-worker-0", "Failed", 2), pod("j-worker-1"), status={"phase": "Running"})
    [h] = _history(p)
    assert h == {"time": "2026-11-25T12:00:00Z", "replica": "j-worker-0", "cause": "failed with container main exit code 2",
                 "counted": True, "podUID": "uid-j-worker-0", "exitCode": 2}  # fmt: skip


def test_the_history_is_bounded():
    job = generic("j")
    old = [
        {"time": "t", "replica": "j-worker-1", "cause": "x", "counted": False, "podUID": f"u{i}"} for i in range(HISTORY_LIMIT)
    ]
    p = run(job, disrupted("j-worker-0", "kubelet"), pod("j-worker-1"), status={"phase": "Running", "restartHistory": old})
    history = _history(p)
    assert len(history) == HISTORY_LIMIT
    assert history[-1]["podUID"] == "uid-j-worker-0"
    assert history[0]["podUID"] == "u1"


def _cai_observed(worker0: Obj) -> list[Obj]:
    return [pod("cai-launcher", rtype="launcher"), worker0, pod("cai-worker-1"), service("cai-worker-0"), service("cai-worker-1")]


@pytest.mark.parametrize(("how", "deleting"), [("kubelet", False), ("eviction-api", True), ("node-gone", True)])
def test_a_fixed_world_launch_restarts_as_a_group_counted_never(how, deleting):
    job = colossal()
    p = run(job, *_cai_observed(disrupted("cai-worker-0", how, deleting)), status={"phase": "Running"})
    assert p.status["phase"] == "Running"
    deleted = sorted(a.name for a in p.actions if isinstance(a, Delete) and a.kind == "Pod")
    expected = ["cai-launcher", "cai-worker-1"] + ([] if deleting else ["cai-worker-0"])
    assert deleted == sorted(expected)
    [h] = _history(p)
    assert h["replica"] == "cai-worker-0 (whole group)"
    assert h["counted"] is False
    assert all(e["restartCount"] == 0 for t in p.status["tasks"] for e in t["status"])
    assert [e.reason for e in p.events if e.reason == "GroupRestarting"] == ["GroupRestarting"]


def test_a_group_restart_wins_over_the_launcher_that_fell_with_it():
    # The launcher noticed the lost worker first and failed: still a restart, not a verdict.
    job = colossal()
    observed = [pod("cai-launcher", "Failed", 1, rtype="launcher"), disrupted("cai-worker-0", "kubelet"), pod("cai-worker-1"),
                service("cai-worker-0"), service("cai-worker-1")]  # fmt: skip
    p = run(job, *observed, status={"phase": "Running"})
    assert p.status["phase"] == "Running"
    assert "cai-launcher" in {a.name for a in p.actions if isinstance(a, Delete)}


def test_a_replica_failure_of_a_group_kind_still_fails_the_job():
    job = colossal()
    p = run(job, *_cai_observed(pod("cai-worker-0", "Failed", 1)), status={"phase": "Running"})
    assert p.status["phase"] == "Failed"
    assert cond(p, "Failed")["reason"] == "WorkerFailed"


def _finished(name: str, code: int, at: str) -> Obj:
    p = pod(name, "Failed", code)
    p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = at
    return p


def test_the_root_cause_is_the_replica_that_failed_first_not_the_last_noticed():
    job = pytorch("pt", ("master", 1), ("worker", 2), policy="Never")
    observed = [_finished("pt-master-0", 1, "2026-11-25T11:59:58Z"), _finished("pt-worker-0", 3, "2026-11-25T11:59:40Z"),
                _finished("pt-worker-1", 1, "2026-11-25T11:59:59Z")]  # fmt: skip
    p = run(job, *observed, status={"phase": "Running"})
    assert p.status["phase"] == "Failed"
    cause = p.status["rootCause"]
    assert cause["replica"] == "pt-worker-0"
    assert cause["exitCode"] == 3
    assert cause["finishedAt"] == "2026-11-25T11:59:40Z"
    assert cond(p, "ReplicaFailure")["message"].startswith("Replicas failed: pt-worker-0: ")


@pytest.mark.parametrize(
    ("policy", "code", "permanent"),
    [("ExitCode", 1, True), ("ExitCode", 137, False), ("ExitCode", 143, False), ("Never", 1, False), ("OnFailure", 1, False)],
)
def test_the_root_cause_says_whether_its_exit_code_is_permanent_under_the_policy(policy, code, permanent):
    job = pytorch("pt", ("master", 1), policy=policy, runPolicy={"backoffLimit": 0})
    p = run(job, _finished("pt-master-0", code, "2026-11-25T11:59:58Z"), status={"phase": "Running"})
    assert p.status["phase"] == "Failed"
    assert p.status["rootCause"]["permanent"] is permanent
