"""operators/failures.py: a failed or unstartable job raises a typed exception that Airflow 3.3's
retry_policy can route, carrying the root-cause replica, its exit code and the reason."""

from __future__ import annotations

import pytest
from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_t9k.operators.failures import (
    T9kJobEvicted,
    T9kJobFailed,
    T9kJobImagePullError,
    T9kJobOOMKilled,
    T9kJobStartupError,
    failure,
    reason_of,
    startup_failure,
)

EVENT = {"kind": "PyTorchTrainingJob", "namespace": "ml", "name": "train-1"}


@pytest.mark.parametrize(
    ("detail", "reason"),
    [("container main exit code 137 (OOMKilled)", "OOMKilled"),
     ("container main exit code 1 (Error)", "Error"),
     ("pod Evicted: the node was low on memory", "Evicted"),
     ("container main exit code 3", ""),
     ("", "")],
)  # fmt: skip
def test_the_reason_is_read_from_the_failure_detail(detail, reason):
    assert reason_of(detail) == reason


@pytest.mark.parametrize(
    ("cause", "permanent", "cls", "reason", "code"),
    [({"replica": "train-1-worker-1", "exitCode": 137, "detail": "container main exit code 137 (OOMKilled)"}, False,
      T9kJobOOMKilled, "OOMKilled", 137),
     ({"replica": "train-1-worker-0", "detail": "pod Evicted: the node was low on memory"}, False,
      T9kJobEvicted, "Evicted", None),
     ({"replica": "train-1-master-0", "exitCode": 2, "detail": "container main exit code 2 (Error)"}, True,
      T9kJobFailed, "Error", 2),
     ({}, False, T9kJobFailed, "", None)],
    ids=["oom", "evicted", "permanent-exit-code", "no-root-cause"],
)  # fmt: skip
def test_a_failed_job_raises_what_happened(cause, permanent, cls, reason, code):
    exc = failure("PyTorchTrainingJob ml/train-1: failed", EVENT, cause, permanent=permanent)
    assert isinstance(exc, cls)
    assert isinstance(exc, AirflowException)
    assert isinstance(exc, AirflowFailException) is permanent  # Airflow never retries those
    assert (exc.kind, exc.namespace, exc.name) == ("PyTorchTrainingJob", "ml", "train-1")
    assert (exc.replica, exc.exit_code, exc.reason) == (cause.get("replica", ""), code, reason)
    assert str(exc) == "PyTorchTrainingJob ml/train-1: failed"


@pytest.mark.parametrize(
    ("waiting", "permanent", "cls", "reason"),
    [({"train-1-worker-0": "ImagePullBackOff"}, False, T9kJobImagePullError, "ImagePullBackOff"),
     ({"train-1-worker-0": "InvalidImageName"}, True, T9kJobImagePullError, "InvalidImageName"),
     ({"train-1-worker-0": "CreateContainerConfigError"}, False, T9kJobStartupError, "CreateContainerConfigError")],
)  # fmt: skip
def test_a_job_that_cannot_start_raises_why(waiting, permanent, cls, reason):
    exc = startup_failure("cannot start", {**EVENT, "waiting": waiting}, permanent=permanent)
    assert type(exc) is cls or (permanent and isinstance(exc, cls))
    assert isinstance(exc, AirflowFailException) is permanent
    assert (exc.replica, exc.reason) == ("train-1-worker-0", reason)


def test_a_retry_policy_routes_them_by_class_or_dotted_path():
    policy = ExceptionRetryPolicy(rules=[
        RetryRule(exception=T9kJobOOMKilled, action=RetryAction.FAIL),
        RetryRule(exception="airflow_t9k.operators.failures.T9kJobEvicted", action=RetryAction.RETRY),
    ])  # fmt: skip
    oom = failure("m", EVENT, {"exitCode": 137, "detail": "container main exit code 137 (OOMKilled)"}, permanent=False)
    evicted = failure("m", EVENT, {"detail": "pod Evicted: low memory"}, permanent=False)
    plain = failure("m", EVENT, {"exitCode": 1, "detail": "container main exit code 1 (Error)"}, permanent=False)
    assert policy.evaluate(oom, 1, 3).action is RetryAction.FAIL
    assert policy.evaluate(evicted, 1, 3).action is RetryAction.RETRY
    assert policy.evaluate(plain, 1, 3).action is RetryAction.DEFAULT


def test_they_pickle():
    import pickle

    exc = failure("m", EVENT, {"exitCode": 137, "detail": "(OOMKilled)"}, permanent=True)
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc)
    assert str(again) == "m"
