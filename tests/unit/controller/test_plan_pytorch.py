"""plan() for PyTorchTrainingJob: ranks and env, ExitCode restarts, shared backoff, deadline."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_t9k.controller.reconcile import Create
from tests.builders import NOW, cond, pod, pytorch, run

M, W0, W1 = "pt-master-0", "pt-worker-0", "pt-worker-1"


def env_of(p, name):
    manifest = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod" and a.name == name)
    # Literal values only: T9K_RESTART_COUNT comes from the pod's annotation (test_checkpoint_env.py).
    return {e["name"]: e["value"] for e in manifest["spec"]["containers"][0]["env"] if "value" in e}


@pytest.mark.parametrize(("name", "rank"), [(M, "0"), (W0, "1"), (W1, "2")])
def test_ranks_follow_replica_spec_order_and_master_is_first_type(name, rank):
    env = env_of(run(pytorch()), name)
    assert env["RANK"] == env["PET_NODE_RANK"] == rank
    assert env["WORLD_SIZE"] == env["PET_NNODES"] == "3"
    assert env["MASTER_ADDR"] == "pt-master-0"
    assert env["MASTER_PORT"] == "23456"


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
    # The master is not restarted; the default clean-up (Unfinished) deletes the workers still running.
    assert p.deletes("Pod") == [W0, W1]
    assert not any(e.reason == "ReplicaRestarting" for e in p.events)
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
    assert '{ "master": [0] }' in cond(failed, "Failed")["message"]


def test_active_deadline_fails_the_job_and_requeues_until_then():
    job = pytorch(runPolicy={"activeDeadlineSeconds": 60, "cleanUpPolicy": "All"})
    started = (NOW - timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    early = run(job, pod(M), pod(W0), pod(W1), status={"phase": "Running", "startTime": started})
    assert early.status["phase"] == "Running"
    assert early.requeue_after == pytest.approx(40)
    late = (NOW - timedelta(seconds=61)).strftime("%Y-%m-%dT%H:%M:%SZ")
    p = run(job, pod(M), pod(W0), pod(W1), status={"phase": "Running", "startTime": late})
    assert p.status["phase"] == "Failed"
    assert cond(p, "Failed")["reason"] == "DeadlineExceeded"
    assert p.deletes("Pod") == [M, W0, W1]


@pytest.mark.parametrize(
    ("spec", "needle"),
    [({"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 2}}, "elastic mode needs torchrun"),
     ({"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 4}, "torchrunConfig": {"enabled": True}},
      "exactly one entry"),
     ({"torchrunConfig": {"enabled": True, "rdzvBackend": "zookeeper"}}, "rdzvBackend"),
     ({"runPolicy": {"backoffLimit": -1}}, "backoffLimit")],
    ids=["elastic-without-torchrun", "elastic-two-types", "rdzv-backend", "backoff"],
)  # fmt: skip
def test_unsupported_or_bad_settings_fail_clearly(spec, needle):
    p = run(pytorch(**spec))
    assert p.status["phase"] == "Failed"
    assert needle in cond(p, "Failed")["message"]


def elastic_job(expected=None, low=2, high=5, replicas=3):
    elastic = {"enabled": True, "minReplicas": low, "maxReplicas": high}
    if expected is not None:
        elastic["expectedReplicas"] = expected
    job = pytorch(
        "pt",
        ("worker", replicas),
        elastic=elastic,
        torchrunConfig={"enabled": True, "procPerNode": "gpu", "maxRestarts": 10, "extraOptions": ["--monitor_interval=1"]},
    )
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["args"] = ["train.py", "--epochs", "3"]
    return job


def test_torchrun_command_replaces_the_container_command():
    manifest = next(a.manifest for a in run(elastic_job()).actions if isinstance(a, Create) and a.kind == "Pod")
    main = manifest["spec"]["containers"][0]
    assert main["command"] == ["torchrun", "--nnodes=2:5", "--nproc_per_node=gpu", "--max_restarts=10", "--rdzv_backend=c10d",
                               "--rdzv_endpoint=pt-worker-0:23456", "--rdzv_id=uid-pt", "--monitor_interval=1",
                               "train.py", "--epochs", "3"]  # fmt: skip
    assert "args" not in main


def test_torchrun_without_elastic_uses_the_fixed_node_count():
    job = pytorch(torchrunConfig={"enabled": True})
    manifest = next(a.manifest for a in run(job).actions if isinstance(a, Create) and a.kind == "Pod")
    assert "--nnodes=3" in manifest["spec"]["containers"][0]["command"]


@pytest.mark.parametrize(
    ("expected", "replicas", "pods"),
    [(4, 3, 4), (9, 3, 5), (1, 3, 2), (None, 3, 3), (None, 7, 5)],
    ids=["expected", "clamped-to-max", "clamped-to-min", "replicas-when-no-expected", "replicas-clamped"],
)
def test_elastic_runs_expected_replicas_within_bounds(expected, replicas, pods):
    p = run(elastic_job(expected, replicas=replicas))
    assert p.creates("Pod") == [f"pt-worker-{i}" for i in range(pods)]


def test_elastic_scale_down_deletes_the_highest_ranks_and_reports_for_the_scale_subresource():
    running = [pod(f"pt-worker-{i}") for i in range(5)]
    p = run(elastic_job(expected=3), *running, status={"phase": "Running"})
    assert p.deletes("Pod") == ["pt-worker-3", "pt-worker-4"]
    assert p.status["elastic"] == {"currentReplicas": 3,  # the two being removed are no longer replicas
                                   "selector": "batch.tensorstack.dev/job-name=pt,"
                                               "batch.tensorstack.dev/job-kind=PyTorchTrainingJob"}  # fmt: skip
    up = run(elastic_job(expected=5), *running[:3], status={"phase": "Running"})
    assert up.creates("Pod") == ["pt-worker-3", "pt-worker-4"]
