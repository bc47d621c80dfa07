"""On failure: which replica failed first, how the failed replicas' logs are bounded, and the
task's error message naming the root cause (airflow_t9k.api.failed, operators.end)."""

from __future__ import annotations

import logging

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.failed import FailedLogs, FailedReplica, first_failed, print_lines, root_cause, strip_stamps
from airflow_t9k.api.logcursor import Cursor
from tests.support.task import context
from tests.unit.airflow.test_operators import op


def _replica(name: str, phase: str = "Failed", finished: str | None = None, code: int = 1) -> dict:
    summary = {"name": "main", "state": "Terminated", "exitCode": code}
    if finished:
        summary["finishedAt"] = finished
    return {"name": name, "phase": phase, "containers": [summary]}


def _job(*replicas: dict) -> dict:
    return {"status": {"tasks": [{"type": "worker", "status": list(replicas)}]}}


def _pod(name: str, *containers: tuple[str, int, str]) -> dict:
    statuses = [{"name": c, "state": {"terminated": {"exitCode": code, "finishedAt": at,
                                                     **({"reason": "OOMKilled"} if code == 137 else {})}}}
                for c, code, at in containers]  # fmt: skip
    return {"metadata": {"name": name}, "status": {"containerStatuses": statuses}}


T1, T2, T3 = "2026-11-26T10:00:01Z", "2026-11-26T10:00:05Z", "2026-11-26T10:00:09Z"


@pytest.mark.parametrize(
    ("job", "pods", "order"),
    [
        # the pods' own containerStatuses decide, whatever the status order
        (_job(_replica("w-0"), _replica("w-1"), _replica("w-2")),
         [_pod("w-0", ("main", 1, T3)), _pod("w-1", ("main", 137, T1)), _pod("w-2", ("main", 1, T2))], ["w-1", "w-2", "w-0"]),
        # a cleaned-up pod: the finishedAt the controller kept in the job's status
        (_job(_replica("w-0", finished=T2), _replica("w-1", finished=T1)), [], ["w-1", "w-0"]),
        (_job(_replica("w-0", finished=T3), _replica("w-1")), [_pod("w-1", ("main", 2, T1))], ["w-1", "w-0"]),
        # an end not on record comes last; ties keep the status order
        (_job(_replica("w-0"), _replica("w-1", finished=T1), _replica("w-2", finished=T1)), [], ["w-1", "w-2", "w-0"]),
        # only failed replicas; a sidecar that exited 0 earlier does not make its replica first
        (_job(_replica("w-0", "Succeeded", T1), _replica("w-1"), _replica("w-2")),
         [_pod("w-1", ("sidecar", 0, T1), ("main", 1, T3)), _pod("w-2", ("main", 1, T2))], ["w-2", "w-1"]),
        (_job(), [], []),
    ],
    ids=["by-pod", "by-status", "pod-then-status", "unknown-last-ties-stable", "failed-containers-only", "none"],
)  # fmt: skip
def test_the_first_replica_to_fail_comes_first(job, pods, order):
    assert [r.pod for r in first_failed(job, pods)] == order


def _caused(job: dict, replica: str, **more) -> dict:
    job["status"]["rootCause"] = {"replica": replica, **more}
    return job


@pytest.mark.parametrize(
    ("job", "pods", "order"),
    [
        # the controller named w-0 (it saw w-0's pod end first; this side reads w-1's pod as earlier)
        (_caused(_job(_replica("w-0", finished=T2), _replica("w-1")), "w-0"), [_pod("w-1", ("main", 1, T1))], ["w-0", "w-1"]),
        # agreeing: nothing moves
        (_caused(_job(_replica("w-0", finished=T2), _replica("w-1", finished=T1)), "w-1"), [], ["w-1", "w-0"]),
        # named but no longer failed (replaced since): leads with what the controller recorded
        (_caused(_job(_replica("w-0", "Running"), _replica("w-1", finished=T1)), "w-0", exitCode=3, finishedAt=T2), [],
         ["w-0", "w-1"]),
        # not a usable name: the job's own order
        (_caused(_job(_replica("w-0", finished=T2), _replica("w-1", finished=T1)), ""), [], ["w-1", "w-0"]),
        ({"status": {"tasks": _job(_replica("w-0", finished=T2), _replica("w-1", finished=T1))["status"]["tasks"],
                     "rootCause": "w-0"}},
         [], ["w-1", "w-0"]),
    ],
    ids=["controller-names-another", "agreeing", "named-not-failed-now", "empty-name", "not-a-dict"],
)  # fmt: skip
def test_the_controllers_root_cause_comes_first(job, pods, order):
    assert [r.pod for r in first_failed(job, pods)] == order


def test_a_root_cause_no_longer_failed_keeps_what_the_controller_recorded():
    job = _caused(_job(_replica("w-0", "Running"), _replica("w-1", finished=T1)), "w-0", exitCode=3, finishedAt=T2)
    assert first_failed(job, [])[0] == FailedReplica("w-0", T2, "exit code 3")


def test_the_root_cause_says_when_and_how():
    replicas = first_failed(
        _job(_replica("w-0"), _replica("w-1")), [_pod("w-0", ("main", 1, T2)), _pod("w-1", ("main", 137, T1))]
    )
    assert replicas[0] == FailedReplica("w-1", T1, "container main exit code 137 (OOMKilled)")
    text = root_cause([r.as_dict() for r in replicas])
    assert text == f"; root cause: replica w-1 failed first (at {T1}, container main exit code 137 (OOMKilled)); then w-0"
    assert root_cause([]) == ""


def _log(n: int, second: int = 0) -> str:
    return "".join(f"2026-11-26T10:00:{second:02d}.{i:09d}Z line {i}\n" for i in range(n))


def _run(plan: FailedLogs, logs: dict[str, str]) -> list[tuple[str, int | None, int]]:
    """Drive the plan as the operator and trigger do: (pod, lines asked, lines printed) in order."""
    done = []
    while (step := plan.next_read()) is not None:
        pod, asked = step
        text = logs[pod] if asked is None else "".join(logs[pod].splitlines(keepends=True)[-asked:])
        done.append((pod, asked, len(plan.add(pod, text, asked))))
    return done


REPLICAS = [FailedReplica("a", T1), FailedReplica("b", T2), FailedReplica("c", T3)]


@pytest.mark.parametrize(
    ("max_lines", "max_pods", "sizes", "expected", "skipped"),
    [
        # equal shares of what is unspent; a short log leaves its share to those after it
        (90, 8, {"a": 100, "b": 100, "c": 100}, [("a", 30, 30), ("b", 30, 30), ("c", 30, 30)], []),
        (90, 8, {"a": 5, "b": 100, "c": 100}, [("a", 30, 5), ("b", 42, 42), ("c", 43, 43)], []),
        # at most max_pods replicas, the first to fail first
        (90, 2, {"a": 100, "b": 100, "c": 100}, [("a", 45, 45), ("b", 45, 45)], ["c"]),
        # fewer lines than replicas: one each, until they are spent
        (2, 8, {"a": 9, "b": 9, "c": 9}, [("a", 1, 1), ("b", 1, 1)], ["c"]),
        (0, 8, {"a": 9, "b": 9, "c": 9}, [], ["a", "b", "c"]),
        # no bound: every log whole
        (None, 8, {"a": 7, "b": 3, "c": 1}, [("a", None, 7), ("b", None, 3), ("c", None, 1)], []),
    ],
    ids=["equal-shares", "roll-over", "max-pods", "fewer-lines-than-pods", "zero", "unbounded"],
)  # fmt: skip
def test_the_failed_logs_are_bounded(max_lines, max_pods, sizes, expected, skipped):
    plan = FailedLogs(REPLICAS, max_lines, max_pods, tail_lines=3)
    assert _run(plan, {p: _log(n) for p, n in sizes.items()}) == expected
    assert plan.skipped() == skipped
    assert sum(n for _, _, n in expected) <= (max_lines if max_lines is not None else 10**9)


def test_lines_already_streamed_are_not_printed_again_but_stay_in_the_tail():
    text = _log(6)
    cursor = Cursor()
    for raw in text.splitlines()[:4]:  # lines 0..3 reached the task log while waiting
        cursor.sent(raw.split(" ", 1)[0])
    plan = FailedLogs(REPLICAS[:1], 100, 8, tail_lines=4, streamed={"a": cursor})
    assert plan.since("a") == "2026-11-26T10:00:00Z"
    assert plan.add("a", text, 100) == ["line 4", "line 5"]
    assert (
        plan.header("a", 2) == f"--- log of failed replica a (failed first: the root cause at {T1}): 2 lines, "
        "the lines streamed above not repeated ---"
    )
    assert plan.report()["logs"] == {"a": "line 2\nline 3\nline 4\nline 5"}


def test_the_root_causes_tail_is_read_on_its_own_when_the_budget_did_not_cover_it():
    plan = FailedLogs(REPLICAS, 0, 8, tail_lines=5)
    assert plan.next_read() is None
    assert plan.tail_read() == ("a", 5)
    plan.set_tail(_log(5))
    assert plan.tail_read() is None
    assert plan.report()["logs"] == {"a": "line 0\nline 1\nline 2\nline 3\nline 4"}
    covered = FailedLogs(REPLICAS, 300, 8, tail_lines=5)
    covered.add("a", _log(10), 100)
    assert covered.tail_read() is None  # the first read already had its last lines


def test_a_log_that_cannot_be_read_says_so_unmangled():
    assert strip_stamps('(log not available: pods "a" not found)') == ['(log not available: pods "a" not found)']


def test_a_long_log_is_printed_in_chunks(caplog):
    log = logging.getLogger("t9k-test")
    with caplog.at_level(logging.INFO, logger="t9k-test"):
        print_lines(log, "--- header ---", [f"l{i}" for i in range(2500)])
    assert [r.getMessage().count("\n") + 1 for r in caplog.records] == [1, 1000, 1000, 500]


def test_the_task_error_names_the_first_failed_replica_and_quotes_its_last_lines():
    event = {"status": "failed", "kind": "GenericJob", "name": "j", "namespace": "ml", "uid": None, "phase": "Failed",
             "message": "phase Failed", "state": {"phase": "Failed", "failed_replicas": ["j-worker-0", "j-worker-1"]},
             "failed_first": [{"pod": "j-worker-1", "finished_at": T1, "detail": "container main exit code 3"},
                              {"pod": "j-worker-0", "finished_at": T2, "detail": "container main exit code 1"}],
             "logs": {"j-worker-1": "Traceback\nValueError: bad batch"}, "logs_printed": True}  # fmt: skip
    with pytest.raises(AirflowException) as exc:
        op(result_from=None).execute_complete(context(), event)
    text = str(exc.value)
    assert "failed replicas: j-worker-1, j-worker-0" in text
    assert f"root cause: replica j-worker-1 failed first (at {T1}, container main exit code 3); then j-worker-0" in text
    assert text.endswith("--- last lines of j-worker-1 ---\nTraceback\nValueError: bad batch")


def test_an_event_from_before_the_upgrade_still_shows_its_tails(caplog):
    event = {"status": "failed", "kind": "GenericJob", "name": "j", "namespace": "ml", "uid": None, "phase": "Failed",
             "message": "phase Failed", "state": {"phase": "Failed", "failed_replicas": ["j-worker-0"]},
             "logs": {"j-worker-0": "old tail"}}  # fmt: skip
    with pytest.raises(AirflowException, match="failed replicas: j-worker-0\n--- last lines of j-worker-0 ---\nold tail$"):
        op(result_from=None).execute_complete(context(), event)
