"""The task's error for a failed AscendJob names what decided it (issue 47, item 5): the replica,
its exit code and the restart policy or backoffLimit, as the controller's Failed condition says,
with the root cause; and ``permanent_exit_codes`` applies, since the root cause stays in the status."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_t9k.api.outcome import interpret
from airflow_t9k.operators.kinds import AscendJobOperator
from tests.unit.airflow.test_operators import RecordingHook, ctx, op
from tests.unit.controller.test_plan_ascend import apod, ascend, leader_service, run, running


def failed_job(policy: str, worker: dict, **spec) -> dict:
    """The AscendJob as the controller leaves it when ``worker`` ends that way."""
    job = ascend(policy=policy, **spec)
    p = run(job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), worker, status=running(job))
    return {**job, "metadata": {**job["metadata"], "namespace": "ml", "uid": "u"}, "status": p.status}


def ended(job: dict) -> dict:
    state = interpret(job)
    return {"status": "failed", "kind": "AscendJob", "name": "ac", "namespace": "ml", "uid": "u", "phase": state.phase,
            "message": state.summary(), "state": state.as_dict(), "logs": {}}  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "worker", "spec", "says"),
    [
        ("Never", apod("ac-worker-1", "Failed", 3), {}, "restartPolicy Never restarts no failed replica"),
        ("OnFailure", apod("ac-worker-1", "Failed", 3, restarts=1), {"runPolicy": {"backoffLimit": 1}},
         "runPolicy.backoffLimit (1) is spent"),
    ],
)  # fmt: skip
def test_the_error_names_the_replica_and_what_did_not_restart_it(policy, worker, spec, says):
    job = failed_job(policy, worker, **spec)
    o = op(AscendJobOperator, framework="pytorch", replicas=3)
    o._hook = RecordingHook(current=job)
    with pytest.raises(AirflowException) as raised:
        o.execute_complete(ctx(), ended(job))
    text = str(raised.value)
    assert "AscendJob ml/ac: phase Failed: AscendJob ac failed: replica ac-worker-1 (Worker) failed with exit code 3" in text
    assert says in text
    assert "root cause: replica ac-worker-1 failed first (container ascend exit code 3)" in text
    assert "rule" not in text
    assert not isinstance(raised.value, AirflowFailException)  # retried as Airflow does
    assert raised.value.replica == "ac-worker-1"
    assert raised.value.exit_code == 3


def test_permanent_exit_codes_apply_to_an_ascend_job():
    # Before issue 47 an AscendJob's status dropped rootCause, so no exit code was ever permanent.
    job = failed_job("Never", apod("ac-worker-1", "Failed", 3))
    o = op(AscendJobOperator, framework="pytorch", replicas=3, permanent_exit_codes=[3])
    o._hook = RecordingHook(current=job)
    with pytest.raises(AirflowFailException, match="not retried: ac-worker-1 .the first replica to fail. exited with code 3"):
        o.execute_complete(ctx(), ended(job))
