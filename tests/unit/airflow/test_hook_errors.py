"""What a user reads when the API says no, or says nothing; and why replicas have not started."""

from __future__ import annotations

import json

import pytest

from airflow_t9k.hooks.t9k import _target, describe_pending, explain
from airflow_t9k.k8s.errors import ApiError, Forbidden, NotFound, NotServed, Unauthorized, Unreachable, from_response

JOBS = "/apis/batch.tensorstack.dev/v1beta1/namespaces/ml/genericjobs"
WHO = "the triggerer's identity (connection 'kubernetes_default')"


@pytest.mark.parametrize(
    ("path", "target"),
    [
        (JOBS, ("genericjobs.batch.tensorstack.dev", "ml", False)),
        (f"{JOBS}/train-1", ("genericjobs.batch.tensorstack.dev", "ml", True)),
        (f"{JOBS}/train-1/status", ("genericjobs.batch.tensorstack.dev/status", "ml", True)),
        ("/api/v1/namespaces/ml/pods", ("pods", "ml", False)),
        ("/api/v1/namespaces/ml/pods/p/log", ("pods/log", "ml", True)),
        ("/apis/batch.tensorstack.dev/v1beta1/genericjobs", ("genericjobs.batch.tensorstack.dev", "", False)),
    ],
)
def test_target_of_a_path(path, target):
    assert _target(path) == target


def _not_served() -> ApiError:
    return from_response(404, json.dumps({"reason": "NotFound", "message": "the server could not find the requested resource"}))


@pytest.mark.parametrize(
    ("exc", "method", "path", "watch", "cls", "says"),
    [
        (
            _not_served(),
            "GET",
            JOBS,
            False,
            NotServed,
            (
                "the API server does not serve genericjobs.batch.tensorstack.dev (404 for the resource type): its CRD is not "
                "installed; install the CRDs: airflow-t9k crds | kubectl apply --server-side -f -"
            ),
        ),
        (
            from_response(403, "{}"),
            "GET",
            JOBS,
            False,
            Forbidden,
            f"{WHO} may not list genericjobs.batch.tensorstack.dev in namespace ml (403 Forbidden)",
        ),
        (
            from_response(403, "{}"),
            "GET",
            JOBS,
            True,
            Forbidden,
            f"{WHO} may not watch genericjobs.batch.tensorstack.dev in namespace ml",
        ),
        (from_response(403, "{}"), "GET", f"{JOBS}/j", False, Forbidden, f"{WHO} may not get genericjobs.batch.tensorstack.dev"),
        (from_response(403, "{}"), "POST", JOBS, False, Forbidden, f"{WHO} may not create genericjobs.batch.tensorstack.dev"),
        (from_response(403, "{}"), "DELETE", f"{JOBS}/j", False, Forbidden, f"{WHO} may not delete genericjobs"),
        (from_response(401, "{}"), "GET", JOBS, False, Unauthorized, f"the API server rejected the credentials of {WHO} (401"),
        (
            Unreachable("https://127.0.0.1:1", "connection refused"),
            "GET",
            JOBS,
            False,
            Unreachable,
            (
                "cannot reach the Kubernetes API server at https://127.0.0.1:1 (connection refused); "
                f"check that the cluster is up and that {WHO} points at it"
            ),
        ),
    ],
    ids=["crd-missing", "list-403", "watch-403", "get-403", "create-403", "delete-403", "401", "unreachable"],
)
def test_explain_names_cause_and_fix(exc, method, path, watch, cls, says):
    out = explain(exc, method, path, WHO, watch=watch)
    assert type(out) is cls
    assert says in out.message


def test_explain_leaves_other_errors_as_they_are():
    err = from_response(404, json.dumps({"message": "x not found", "details": {"name": "x"}}))
    assert explain(err, "GET", f"{JOBS}/x", WHO) is err
    assert type(err) is NotFound


def pod(name, phase="Pending", cond=None, waiting=None):
    status: dict = {"phase": phase}
    if cond:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": cond}]
    if waiting:
        status["containerStatuses"] = [{"name": "main", "state": {"waiting": waiting}}]
    return {"metadata": {"name": name}, "status": status}


def warning(obj, reason, message, when="2026-11-25T12:00:00Z"):
    return {"type": "Warning", "reason": reason, "message": message, "involvedObject": {"name": obj}, "lastTimestamp": when}


GPU = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available."


@pytest.mark.parametrize(
    ("pods", "events", "expect"),
    [
        ([pod("j-worker-0", cond=GPU), pod("j-worker-1", cond=GPU)], [], f"j-worker-0, j-worker-1: Unschedulable: {GPU}"),
        (
            [pod(f"j-worker-{i}", cond=GPU) for i in range(5)],
            [],
            f"j-worker-0, j-worker-1, j-worker-2 and 2 more: Unschedulable: {GPU}",
        ),
        ([pod("j-worker-0", cond=GPU), pod("j-worker-1", phase="Running")], [], f"j-worker-0: Unschedulable: {GPU}"),
        ([pod("j-worker-0")], [warning("j-worker-0", "FailedScheduling", GPU)], f"j-worker-0: FailedScheduling: {GPU}"),
        (
            [pod("j-worker-0", waiting={"reason": "ImagePullBackOff", "message": "Back-off pulling image x"})],
            [],
            "j-worker-0: ImagePullBackOff: Back-off pulling image x",
        ),
        (
            [],
            [warning("j", "FailedCreate", 'pods "j-worker-0" is forbidden: exceeded quota')],
            'FailedCreate: pods "j-worker-0" is forbidden: exceeded quota',
        ),
        ([pod("j-worker-0")], [], "j-worker-0: Pending (no reason reported yet)"),
    ],
    ids=[
        "unschedulable-grouped",
        "many-pods-bounded",
        "only-pending",
        "event-fallback",
        "image-pull",
        "no-pods-job-event",
        "no-reason",
    ],
)
def test_describe_pending(pods, events, expect):
    assert describe_pending(pods, events) == expect


def test_describe_pending_is_bounded():
    long = "x" * 5000
    assert len(describe_pending([pod("j-worker-0", cond=long)], [])) <= 600
