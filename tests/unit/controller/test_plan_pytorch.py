"""plan() for PyTorchTrainingJob: ranks and env, ExitCode restarts, shared backoff, deadline."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_t9k.controller.reconcile import Create
from tests.builders import NOW, cond, pod, pytorch, run

M, W0, W1 = "pt-master-0", "pt-worker-0", "pt-worker-1"


def env_of(p, name):
    manifest = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod" and a.name == name)
    return {e["name"]: e["value"] for e in manifest["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize(("name", "rank"), [(M, "0"), (W0, "1"), (W1, "2")])
def test_ranks_follow_replica_spec_order_and_master_is_first_type(name, rank):
    env = env_of(run(pytorch()), name)
    assert env["RANK"] == env["PET_NODE_RANK"] == rank
    assert env["WORLD_SIZE"] == env["PET_NNODES"] == "3"
    assert env["MASTER_ADDR"] == "pt-master-0" and env["MASTER_PORT"] == "23456"


def test_every_replica_gets_a_service_for_the_master_port():
    p = run(pytorch())
    assert p.creates("Service") == [M, W0, W1]


@pytest.mark.parametrize(
    ("code", "reason", "restarts"),
    [(137, None, True), (143, None, True), (130, None, True), (138, None, True), (1, None, False), (2, None, False)],
    ids=["sigkill", "sigterm", "sigint", "restart-me", "error", "usage"],
)
def test_exit_code_policy_retries_only_retryable_codes(code, reason, restarts):
    p = run(pytorch(), pod(M), pod(W0, "Failed", code), pod(W1), status={"phase": "Running"})
    assert (W0 in p.deletes("Pod")) is restarts
    if not restarts:  # a worker's failure is not the master's: the job keeps running
        assert p.status["phase"] == "Running"


def test_evicted_pod_is_retried_under_exit_code():
    evicted = pod(W0, "Failed")
    evicted["status"]["reason"] = "Evicted"
    p = run(pytorch(), pod(M), evicted, pod(W1), status={"phase": "Running"})
    assert W0 in p.deletes("Pod")


def test_backoff_limit_is_shared_across_replicas():
    job = pytorch(runPolicy={"backoffLimit": 2})
    # two restarts already spent, one by each worker: none left for anyone
    p = run(job, pod(M, "Failed", 137, restarts=0), pod(W0, restarts=1), pod(W1, restarts=1), status={"phase": "Running"})
    assert p.deletes("Pod") == []
    assert p.status["phase"] == "Failed"
    assert p.status["backoffCount"] == 2


def test_two_failures_in_one_pass_spend_the_budget_in_order():
    job = pytorch(runPolicy={"backoffLimit": 1})
    p = run(job, pod(M), pod(W0, "Failed", 137), pod(W1, "Failed", 137), status={"phase": "Running"})
    assert p.deletes("Pod") == [W0]
    assert p.status["backoffCount"] == 1


def test_master_decides():
    assert run(pytorch(), pod(M, "Succeeded", 0), pod(W0), pod(W1), status={"phase": "Running"}).status["phase"] == "Succeeded"
    failed = run(pytorch(policy="Never"), pod(M, "Failed", 1), pod(W0), pod(W1), status={"phase": "Running"})
    assert failed.status["phase"] == "Failed"
    assert '{"master": [0]}' in cond(failed, "Failed")["message"]


def test_active_deadline_fails_the_job_and_requeues_until_then():
    job = pytorch(runPolicy={"activeDeadlineSeconds": 60, "cleanUpPolicy": "All"})
    started = (NOW - timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    early = run(job, pod(M), pod(W0), pod(W1), status={"phase": "Running", "startTime": started})
    assert early.status["phase"] == "Running" and early.requeue_after == pytest.approx(40)
    late = (NOW - timedelta(seconds=61)).strftime("%Y-%m-%dT%H:%M:%SZ")
    p = run(job, pod(M), pod(W0), pod(W1), status={"phase": "Running", "startTime": late})
    assert p.status["phase"] == "Failed" and cond(p, "Failed")["reason"] == "DeadlineExceeded"
    assert p.deletes("Pod") == [M, W0, W1]


@pytest.mark.parametrize(
    ("spec", "needle"),
    [({"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 2}}, "elastic mode is not supported"),
     ({"torchrunConfig": {"enabled": True}}, "torchrun launch is not supported"),
     ({"runPolicy": {"backoffLimit": -1}}, "backoffLimit")],
    ids=["elastic", "torchrun", "backoff"],
)  # fmt: skip
def test_unsupported_or_bad_settings_fail_clearly(spec, needle):
    p = run(pytorch(**spec))
    assert p.status["phase"] == "Failed" and needle in cond(p, "Failed")["message"]
