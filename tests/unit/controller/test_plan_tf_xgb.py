"""plan() for TensorFlowTrainingJob (TF_CONFIG, chief decides) and XGBoostTrainingJob."""

from __future__ import annotations

import json

import pytest

from airflow_t9k.controller.reconcile import Create
from tests.builders import cond, pod, run, training


def tf(*types, **spec):
    return training("TensorFlowTrainingJob", "tensorflow", "tf", *types, **spec)


def xgb(*types, **spec):
    return training("XGBoostTrainingJob", "xgboost", "xg", *types, **spec)


def env_of(p, name):
    manifest = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod" and a.name == name)
    # Literal values only: T9K_RESTART_COUNT comes from the pod's annotation (test_checkpoint_env.py).
    return {e["name"]: e["value"] for e in manifest["spec"]["containers"][0]["env"] if "value" in e}


def test_tf_config_lists_the_cluster_without_the_evaluator():
    p = run(tf(("chief", 1), ("worker", 2), ("ps", 1), ("evaluator", 1)))
    config = json.loads(env_of(p, "tf-worker-1")["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 1}
    assert config["cluster"] == {
        "chief": ["tf-chief-0:2222"], "worker": ["tf-worker-0:2222", "tf-worker-1:2222"], "ps": ["tf-ps-0:2222"]}  # fmt: skip
    assert json.loads(env_of(p, "tf-evaluator-0")["TF_CONFIG"])["task"] == {"type": "evaluator", "index": 0}
    assert p.creates("Service") == ["tf-chief-0", "tf-worker-0", "tf-worker-1", "tf-ps-0", "tf-evaluator-0"]


@pytest.mark.parametrize(
    ("types", "pods", "phase"),
    [
        ((("chief", 1), ("worker", 2)), [pod("tf-chief-0", "Succeeded", 0), pod("tf-worker-0"), pod("tf-worker-1")], "Succeeded"),
        ((("chief", 1), ("worker", 2)), [pod("tf-chief-0"), pod("tf-worker-0", "Succeeded", 0), pod("tf-worker-1")], "Running"),
        ((("worker", 2), ("ps", 1)), [pod("tf-worker-0", "Succeeded", 0), pod("tf-worker-1"), pod("tf-ps-0")], "Succeeded"),
        ((("ps", 1), ("worker", 2)), [pod("tf-ps-0"), pod("tf-worker-0", "Succeeded", 0), pod("tf-worker-1")], "Succeeded"),
    ],
    ids=["chief-decides", "worker-alone-does-not", "worker-0-without-chief", "worker-0-even-if-ps-first"],
)
def test_tf_master(types, pods, phase):
    assert run(tf(*types), *pods, status={"phase": "Running"}).status["phase"] == phase


@pytest.mark.parametrize(
    ("job", "needle"),
    [
        (tf(("ps", 1), ("evaluator", 1)), "needs a chief or at least one worker"),
        (tf(("master", 1)), "type must be one of chief, worker, ps, evaluator"),
        (training("TensorFlowTrainingJob", "trainer", "tf", ("worker", 1)), "container named 'tensorflow'"),
        (xgb(("worker", 2)), "needs a master replica"),
        (xgb(("master", 1), ("ps", 1)), "type must be one of master, worker"),
    ],
    ids=["tf-no-master", "tf-bad-type", "tf-no-container", "xgb-no-master", "xgb-bad-type"],
)
def test_bad_input(job, needle):
    p = run(job)
    assert p.status["phase"] == "Failed"
    assert needle in cond(p, "Failed")["message"]


def test_xgboost_environment():
    p = run(xgb(("master", 1), ("worker", 2)))
    assert env_of(p, "xg-master-0") | {} == {
        "PYTHONUNBUFFERED": "1", "MASTER_ADDR": "xg-master-0", "MASTER_PORT": "9999", "RANK": "0", "WORLD_SIZE": "3",
        "WORKER_PORT": "9999", "WORKER_ADDRS": "xg-worker-0,xg-worker-1"}  # fmt: skip
    assert env_of(p, "xg-worker-1")["RANK"] == "2"


def test_xgboost_master_decides_and_restarts_share_backoff():
    job = xgb(("master", 1), ("worker", 2), runPolicy={"backoffLimit": 1})
    first = run(job, pod("xg-master-0"), pod("xg-worker-0", "Failed", 1), pod("xg-worker-1"), status={"phase": "Running"})
    assert first.deletes("Pod") == ["xg-worker-0"]
    assert first.status["backoffCount"] == 1
    done = run(job, pod("xg-master-0", "Succeeded", 0), pod("xg-worker-0"), pod("xg-worker-1"), status={"phase": "Running"})
    assert done.status["phase"] == "Succeeded"
