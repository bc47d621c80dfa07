"""Which failures an Airflow retry can help (issue 23, point 2): a table, then the operator's choice."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_t9k.api.outcome import JobState, interpret
from airflow_t9k.api.retry import check_codes, permanent
from airflow_t9k.operators.failures import T9kJobError
from tests.unit.airflow.test_operators import ctx, event, finishing_op


def _state(reason: str = "Failed", **cause: object) -> JobState:
    return JobState("Failed", reason=reason, root_cause=dict(cause))


@pytest.mark.parametrize(
    ("state", "codes", "retry_helps"),
    [
        (_state("InvalidSpec"), None, False),
        # ExitCode calls 1 permanent inside the job; Airflow's retries are the DAG author's (issue 28, point 3).
        (_state(replica="j-worker-0", exitCode=1, permanent=True), None, True),
        (_state(replica="j-worker-0", exitCode=134, permanent=True), None, True),  # an NCCL abort
        (_state(replica="j-worker-0", exitCode=137, permanent=False), None, True),
        (_state(replica="j-worker-0", exitCode=1), None, True),  # Never/OnFailure: nobody called it permanent
        (_state(replica="j-worker-0", exitCode=2), frozenset({2, 3}), False),  # the task's own list
        (_state(replica="j-worker-0", exitCode=1, permanent=True), frozenset({2}), True),  # the task's list wins
        (_state("DeadlineExceeded"), None, True),
        (_state(), None, True),  # no root cause recorded (an older controller)
        (_state(replica="j-worker-0", exitCode="1"), frozenset({1}), True),  # not an int: never guessed
    ],
    ids=["invalid-spec", "exitcode-permanent", "nccl-abort", "exitcode-signal", "no-policy-opinion", "task-list",
         "task-list-wins", "deadline", "no-root-cause", "malformed"],
)  # fmt: skip
def test_which_failures_a_retry_can_help(state, codes, retry_helps):
    assert (permanent(state, codes) is None) is retry_helps


@pytest.mark.parametrize("bad", ["12", [0], [256], [True], [1.5], 3])
def test_permanent_exit_codes_are_checked(bad):
    with pytest.raises((ValueError, TypeError)):
        check_codes(bad)


def test_the_root_cause_is_read_from_status():
    job = {"status": {"phase": "Failed", "rootCause": {"replica": "j-worker-1", "exitCode": 3}, "conditions": []}}
    assert interpret(job).root_cause == {"replica": "j-worker-1", "exitCode": 3}
    assert interpret(job).as_dict()["root_cause"] == {"replica": "j-worker-1", "exitCode": 3}


@pytest.mark.parametrize(
    ("root_cause", "codes", "raised"),
    [
        ({"replica": "j-worker-1", "exitCode": 3, "detail": "container main exit code 3"}, [3], AirflowFailException),
        ({"replica": "j-worker-1", "exitCode": 3, "detail": "container main exit code 3"}, None, AirflowException),
        ({"replica": "j-worker-1", "exitCode": 1, "detail": "exit code 1", "permanent": True}, None, AirflowException),
    ],
)
def test_the_task_fails_without_retries_only_when_a_retry_cannot_help(root_cause, codes, raised):
    ev = event("failed", phase="Failed", state={"phase": "Failed", "failed_replicas": ["j-worker-1"], "root_cause": root_cause})
    with pytest.raises(AirflowException) as exc:
        finishing_op(permanent_exit_codes=codes).execute_complete(ctx(), ev)
    assert isinstance(exc.value, T9kJobError)  # typed (operators/failures.py), and retried or not as Airflow says:
    assert isinstance(exc.value, AirflowFailException) is (raised is AirflowFailException)
    assert "root cause: replica j-worker-1 failed first" in str(exc.value)
    assert ("not retried:" in str(exc.value)) is (raised is AirflowFailException)


@pytest.mark.parametrize(
    ("waiting", "raised"),
    [
        ({"j-worker-0": "ImagePullBackOff"}, AirflowException),  # a registry's rate limit: retried after retry_delay
        ({"j-worker-0": "ErrImagePull"}, AirflowException),
        ({"j-worker-0": "CreateContainerConfigError"}, AirflowException),  # a Secret created meanwhile
        ({"j-worker-0": "InvalidImageName", "j-worker-1": "ImagePullBackOff"}, AirflowFailException),
        (None, AirflowException),  # an event of an earlier version, its message naming no invalid image
    ],
)
def test_a_job_that_cannot_start_is_retried_unless_its_image_name_is_invalid(waiting, raised):
    ev = {**event("startup_error", message="GenericJob ml/j cannot start (...): image nope:1 cannot be pulled"),
          **({"waiting": waiting} if waiting else {})}  # fmt: skip
    with pytest.raises(AirflowException) as exc:
        finishing_op().execute_complete(ctx(), ev)
    assert isinstance(exc.value, T9kJobError)  # typed (operators/failures.py), and retried or not as Airflow says:
    assert isinstance(exc.value, AirflowFailException) is (raised is AirflowFailException)
    assert "image nope:1 cannot be pulled" in str(exc.value)
    assert ("not retried: a replica's image name is invalid" in str(exc.value)) is (raised is AirflowFailException)


@pytest.mark.parametrize(("lines", "annotation"), [(None, None), (0, "0"), (200, "200")])
def test_evidence_log_lines_reach_the_controller_as_an_annotation(lines, annotation):
    from airflow_t9k.operators.kinds import GenericJobOperator
    from tests.unit.airflow.test_operators import op

    o = op(GenericJobOperator, image="busybox", evidence_log_lines=lines)
    job = o.render_job(ctx())
    assert (job["metadata"]["annotations"].get("batch.tensorstack.dev/evidence-log-lines")) == annotation


@pytest.mark.parametrize("bad", [-1, True, "5"])
def test_evidence_log_lines_are_checked(bad):
    from airflow_t9k.operators.kinds import GenericJobOperator
    from tests.unit.airflow.test_operators import op

    with pytest.raises(ValueError, match="evidence_log_lines must be a non-negative integer"):
        op(GenericJobOperator, image="busybox", evidence_log_lines=bad)


@pytest.mark.parametrize(("skip", "code", "skipped"), [(3, 3, True), ([3, 4], 4, True), (3, 1, False), (None, 3, False)])
def test_skip_on_exit_code_skips_as_kubernetes_pod_operator_does(skip, code, skipped):
    from airflow.sdk.exceptions import AirflowSkipException

    cause = {"replica": "j-worker-1", "exitCode": code, "detail": f"container main exit code {code}"}
    ev = event("failed", phase="Failed", state={"phase": "Failed", "failed_replicas": ["j-worker-1"], "root_cause": cause})
    with pytest.raises(AirflowException) as exc:
        finishing_op(skip_on_exit_code=skip).execute_complete(ctx(), ev)
    assert isinstance(exc.value, AirflowSkipException) is skipped


def test_skip_on_exit_code_is_checked():
    with pytest.raises(ValueError, match="skip_on_exit_code must be exit codes"):
        finishing_op(skip_on_exit_code=[0])
