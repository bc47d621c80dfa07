"""Which replicas' logs reach the task log (airflow_t9k.operators.logs.pods_to_follow)."""

from __future__ import annotations

import pytest

from airflow_t9k.operators.kinds import OPERATORS
from airflow_t9k.operators.logs import pods_to_follow, replica_pods
from tests.unit.airflow.test_operators import ctx, op


@pytest.mark.parametrize(
    ("kind", "deciding"),
    [("GenericJob", "worker-0"), ("PyTorchTrainingJob", "worker-0"), ("TensorFlowTrainingJob", "worker-0"),
     ("XGBoostTrainingJob", "master-0"), ("MPIJob", "launcher"), ("ColossalAIJob", "launcher"),
     ("DeepSpeedJob", "worker-0"), ("BeamJob", None)],
)  # fmt: skip
def test_the_deciding_replica_is_followed_by_default(kind, deciding):
    job = op(OPERATORS[kind], command="python t.py", replicas=3).render_job(ctx())
    job["metadata"]["uid"] = "u"
    got = pods_to_follow(job, "deciding", 8)
    assert got == (None if deciding is None else [f"{job['metadata']['name']}-{deciding}"])
    assert pods_to_follow(job, "all", 8) is None  # every running replica, as they come


def test_replica_pods_come_from_the_jobs_status_in_order():
    job = {"status": {"tasks": [{"type": "master", "status": [{"name": "j-master-0"}]},
                                {"type": "worker", "status": [{"name": "j-worker-0"}, {"name": "j-worker-1"}]}]}}  # fmt: skip
    assert replica_pods(job) == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert replica_pods(None) == []


@pytest.mark.parametrize(("kwargs", "error"),
                         [({"log_replicas": "some"}, "log_replicas"), ({"max_log_lines": -1}, "max_log_lines"),
                                               ({"max_followed_pods": "8"}, "max_followed_pods")])  # fmt: skip
def test_bad_log_settings_fail_at_dag_parse(kwargs, error):
    with pytest.raises(ValueError, match=error):
        op(**kwargs)


def test_the_operator_hands_its_log_settings_to_the_trigger():
    o = op(log_replicas="all", max_log_lines=50, max_followed_pods=2)
    o._follow_pods = None
    t = o._trigger({"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u"}, None)
    assert (t.forwarding.max_log_lines, t.forwarding.max_followed_pods, t.forwarding.follow_pods) == (50, 2, None)
    o._follow_pods = ["j-worker-0"]
    assert o._trigger({"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u"}, None).forwarding.follow_pods == (
        "j-worker-0",
    )


def _job(phase: str | None, *replicas: tuple[str, str]) -> dict:
    tasks = [{"name": "worker", "status": [{"name": n, "phase": p} for n, p in replicas]}]
    return {"status": {"phase": phase, "tasks": tasks}}


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (_job("Succeeded", ("j-worker-0", "Succeeded"), ("j-worker-1", "Running")), ("j-worker-0", "j-worker-1")),
        (_job("Failed", ("j-worker-0", "Failed"), ("j-worker-1", "Succeeded")), ("j-worker-1",)),  # the failed-logs report's
        (_job("Succeeded", ("j-worker-0", "Failed"), ("j-worker-1", "Succeeded")), ("j-worker-0", "j-worker-1")),
        (_job("Succeeded", ("", "Succeeded")), ()),  # not created yet: no name on record
        ({"status": {"phase": "Succeeded"}}, ()),
        ({}, ()),
    ],
)
def test_the_replicas_read_once_more_at_the_jobs_end(job, expected):
    from airflow_t9k.api.outcome import interpret

    assert interpret(job).replicas_read_at_end == expected
