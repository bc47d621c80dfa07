"""Seed 001's defaults where the job says nothing: cleanUpPolicy (Unfinished, for every kind that
has the field) and restartPolicy Always without a limit (no limit)."""

from __future__ import annotations

import pytest

from airflow_t9k.kinds.base import UNLIMITED, InvalidSpec, RestartPolicy, parse_restart_policy
from tests.builders import generic, pod, pytorch, restart, run, service, training
from tests.kind_jobs import minimal

# -- cleanUpPolicy absent: Unfinished ------------------------------------------------------


def _w(i: int) -> str:
    return f"job-worker-{i}"


GENERIC_PODS = (pod(_w(0), "Failed", 1), pod(_w(1), "Running"), pod(_w(2), "Succeeded", 0), pod(_w(3), "Pending"))
TYPES = (("worker", 4),)


@pytest.mark.parametrize(
    ("job", "objects", "phase", "deleted", "services"),
    [
        # A failed GenericJob: the replicas still running or waiting go, those that ended stay for their logs.
        (generic("job", *TYPES), GENERIC_PODS, "Failed", [_w(1), _w(3)], [_w(0), _w(1), _w(2), _w(3)]),
        (generic("job", *TYPES, cleanUpPolicy="None"), GENERIC_PODS, "Failed", [], []),  # debugging: everything stays
        (generic("job", *TYPES, cleanUpPolicy="All"), GENERIC_PODS, "Failed", [_w(0), _w(1), _w(2), _w(3)],
         [_w(0), _w(1), _w(2), _w(3)]),
        # A succeeded one too (its success rule held while others ran).
        (generic("job", *TYPES, successRules=[{"worker": [2]}]), GENERIC_PODS[1:], "Succeeded", [_w(1), _w(3)],
         [_w(0), _w(1), _w(2), _w(3)]),
        # PyTorch: the master fails for good (exit code 1 is not retried); its workers, blocked in a collective, go.
        (pytorch("pt"), (pod("pt-master-0", "Failed", 1), pod("pt-worker-0"), pod("pt-worker-1", "Succeeded", 0)),
         "Failed", ["pt-worker-0"], []),
        # TensorFlow: the chief succeeded; the parameter servers never end by themselves.
        (training("TensorFlowTrainingJob", "tensorflow", "tf", ("chief", 1), ("ps", 2)),
         (pod("tf-chief-0", "Succeeded", 0), pod("tf-ps-0"), pod("tf-ps-1")), "Succeeded", ["tf-ps-0", "tf-ps-1"], []),
        (training("XGBoostTrainingJob", "xgboost", "xgb", ("master", 1), ("worker", 1), policy="Never"),
         (pod("xgb-master-0", "Failed", 1), pod("xgb-worker-0")), "Failed", ["xgb-worker-0"], []),
        # DeepSpeed: worker 0 decides, its 3 restarts spent.
        (minimal("DeepSpeedJob", "ds"), (pod("ds-worker-0", "Failed", 1, restarts=3), pod("ds-worker-1")), "Failed",
         ["ds-worker-1"], []),
        # Kinds without cleanUpPolicy keep their own defaults: MPIJob's cleanUpWorkers is false.
        (minimal("MPIJob", "mpi"), (pod("mpi-launcher", "Failed", 1, rtype="launcher"), pod("mpi-worker-0"),
                                    pod("mpi-worker-1")), "Failed", [], []),
    ],
)  # fmt: skip
def test_a_finished_job_without_a_policy_is_cleaned_up_as_unfinished(job, objects, phase, deleted, services):
    svcs = [service(n) for n in services]
    p = run(job, *objects, *svcs, status={"phase": "Running"})
    assert p.status["phase"] == phase
    assert p.deletes("Pod") == deleted
    assert p.deletes("Service") == services


def test_the_deleted_replicas_are_recorded_as_deleted_and_the_ended_ones_keep_their_exit_codes():
    p = run(generic("job", *TYPES), *GENERIC_PODS, status={"phase": "Running"})
    first = p.status
    again = run(generic("job", *TYPES), GENERIC_PODS[0], GENERIC_PODS[2], status=first)  # the running ones are gone
    entries = {e["name"]: e for e in again.status["tasks"][0]["status"]}
    assert {n: e["phase"] for n, e in entries.items()} == {
        _w(0): "Failed",
        _w(1): "Deleted",
        _w(2): "Succeeded",
        _w(3): "Deleted",
    }
    assert entries[_w(0)]["containers"][0]["exitCode"] == 1
    assert again.deletes("Pod") == []  # nothing more: the failed and succeeded replicas stay


# -- restartPolicy: Always has no limit unless one is given ----------------------------------


@pytest.mark.parametrize(
    ("raw", "policy"),
    [
        (None, RestartPolicy("Never", 0)),
        ({"policy": "Never"}, RestartPolicy("Never", 0)),
        ({"policy": "OnFailure"}, RestartPolicy("OnFailure", 3)),
        ({"policy": "Always"}, RestartPolicy("Always", UNLIMITED)),
        ({"policy": "Always", "limit": 2}, RestartPolicy("Always", 2)),
        ({"policy": "Always", "limit": 0}, RestartPolicy("Always", 0)),
        ({"policy": "OnFailure", "limit": 7}, RestartPolicy("OnFailure", 7)),
    ],
)
def test_restart_policy_defaults(raw, policy):
    assert parse_restart_policy(raw) == policy


def test_a_bad_limit_is_refused():
    with pytest.raises(InvalidSpec, match="non-negative integer"):
        parse_restart_policy({"policy": "Always", "limit": -1})


W0, W1 = "job-worker-0", "job-worker-1"


@pytest.mark.parametrize(
    ("policy", "limit", "done", "phase", "restarted", "event"),
    [
        ("Always", None, 3, "Failed", True, "(4, no limit, policy Always)"),  # failed: restarted anyway
        ("Always", None, 1000, "Succeeded", True, "(1001, no limit, policy Always)"),  # completed: restarted too
        ("Always", 3, 3, "Failed", False, None),  # the limit given stops it
        ("OnFailure", None, 3, "Failed", False, None),  # OnFailure keeps its 3
        ("OnFailure", None, 2, "Failed", True, "(3/3, policy OnFailure)"),
    ],
)
def test_always_without_a_limit_never_stops_restarting(policy, limit, done, phase, restarted, event):
    job = restart(generic(successRules=[{"worker": [0, 1]}]), policy, limit)
    code = 1 if phase == "Failed" else 0
    p = run(job, pod(W0, phase, code, restarts=done), pod(W1), status={"phase": "Running"})
    assert (W0 in p.deletes("Pod")) is restarted
    if restarted:
        assert p.status["phase"] == "Running"
        (message,) = [e.message for e in p.events if e.reason == "ReplicaRestarting"]
        assert message.endswith(event + ".")
    else:
        assert p.status["phase"] == "Failed"  # failed for good: the default failure rule
