"""An AscendJob's end names what decided it (issue 47, item 5): the replica, its exit code and the
restart policy or backoffLimit that did not restart it, never a failure rule AscendJob does not
have (before: 'The job is failed with rule: { "Worker": [1] }')."""

from __future__ import annotations

import pytest

from airflow_t9k.kinds.ascend_verdict import verdict
from airflow_t9k.kinds.verdict import BACKOFF, LIMIT, POLICY, Ended
from tests.unit.controller.test_plan_ascend import apod, ascend, conditions, leader_service, run, running


def failed(p) -> dict:
    return next(c for c in p.status["conditions"] if c["type"] == "Failed")


@pytest.mark.parametrize(
    ("policy", "worker", "run_policy", "reason", "says"),
    [
        ("Never", apod("ac-worker-1", "Failed", 1), None, "ReplicaFailed",
         ("replica ac-worker-1 (Worker) failed with exit code 1 and was not restarted: restartPolicy Never restarts no "
         "failed replica")),
        ("ExitCode", apod("ac-worker-1", "Failed", 2), None, "ReplicaFailed",
         ("failed with exit code 2 and was not restarted: restartPolicy ExitCode restarts only exit codes from a signal "
         "(128 and above)")),
        ("OnFailure", apod("ac-worker-1", "Failed", 1, restarts=1), {"backoffLimit": 1}, "BackoffLimitExceeded",
         ("replica ac-worker-1 (Worker) failed with exit code 1 after 1 restart(s), and runPolicy.backoffLimit (1) is "
         "spent (restartPolicy OnFailure)")),
        ("ExitCode", apod("ac-worker-1", "Failed", 137, restarts=2), {"backoffLimit": 2}, "BackoffLimitExceeded",
         "failed with exit code 137 after 2 restart(s), and runPolicy.backoffLimit (2) is spent (restartPolicy ExitCode)"),
        ("OnFailure", apod("ac-worker-1", "Failed", 1), {"backoffLimit": 0}, "BackoffLimitExceeded",
         "after 0 restart(s), and runPolicy.backoffLimit (0) is spent"),
    ],
    ids=["never", "exitcode-own-error", "onfailure-backoff-spent", "exitcode-signal-backoff-spent", "backoff-zero"],
)  # fmt: skip
def test_the_failed_condition_names_what_decided(policy, worker, run_policy, reason, says):
    job = ascend(policy=policy, **({"runPolicy": run_policy} if run_policy else {}))
    p = run(job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), worker, status=running(job))
    cond = failed(p)
    assert (cond["status"], cond["reason"]) == ("True", reason)
    assert cond["message"].startswith("AscendJob ac failed: "), cond["message"]
    assert says in cond["message"], cond["message"]
    assert "rule" not in cond["message"]
    # The Warning Event at the end says the same.
    assert [e.message for e in p.events if e.reason == "Failed"] == [cond["message"]]
    # The root cause stays in the status (the operator's error and permanent_exit_codes read it).
    assert p.status["rootCause"]["replica"] == "ac-worker-1"
    assert p.status["rootCause"]["exitCode"] == worker["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]


def test_success_names_every_pod_not_a_rule():
    job = ascend()
    done = [apod(n, "Succeeded", 0) for n in ("ac-master-0", "ac-worker-0", "ac-worker-1")]
    p = run(job, leader_service(), *done, status=running(job))
    cond = next(c for c in p.status["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "AscendJobSucceeded"
    assert cond["message"].startswith("AscendJob ac succeeded: all 3 pods succeeded")
    assert "rule" not in cond["message"]


def test_the_history_of_a_disruption_stays_in_the_status():
    job = ascend(policy="Never")
    evicted = apod("ac-worker-1", "Failed")
    evicted["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    p = run(job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), evicted, status=running(job))
    assert "Failed" not in conditions(p.status) or conditions(p.status)["Failed"] != "True"
    [entry] = p.status["restartHistory"]
    assert (entry["replica"], entry["counted"]) == ("ac-worker-1", False)
    again = run(job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), evicted, status=p.status)
    assert [e.reason for e in again.events if e.reason == "ReplicaDisrupted"] == []  # on record: said once


@pytest.mark.parametrize(
    ("ended", "reason"),
    [
        ([Ended("a-worker-0", "Worker", "Failed", None, "ExitCode", 0, POLICY)], "ReplicaFailed"),
        ([Ended("a-worker-0", "Worker", "Failed", 1, "OnFailure", 3, LIMIT)], "BackoffLimitExceeded"),
        ([Ended("a-worker-0", "Worker", "Failed", 1, "OnFailure", 3, BACKOFF)], "BackoffLimitExceeded"),
        ([Ended("a-worker-0", "Worker", "Failed", 1, "OnFailure", 0, "")], None),  # nothing to name: the core's
    ],
)
def test_the_verdict_table(ended, reason):
    got = verdict({"metadata": {"name": "a"}}, "Failed", ended, 3)
    assert (got or (None,))[0] == reason
    if reason == "ReplicaFailed":
        assert "failed with no exit code" in got[1]
