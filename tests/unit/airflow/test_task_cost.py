"""A task instance's cost over all its tries and re-runs (api/taskcost.py, issue 48 item 6)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_t9k.api import taskcost
from airflow_t9k.api.outcome import interpret, usage_of

GPU = "nvidia.com/gpu"


def usage(gpu: float, wasted: float = 0, cpu: float = 10, wall: float = 100, queue: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"accelerator_seconds": {GPU: gpu}, "wasted_accelerator_seconds": {GPU: wasted} if wasted else {},
                           "cpu_seconds": cpu, "runs": 1, "wall_seconds": wall, "accelerator_hours": gpu / 3600}  # fmt: skip
    if queue is not None:
        out["queue_seconds"] = queue
    return out


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # one try, one job
        (
            [(1, "a", usage(3600, queue=5))],
            {
                "jobs": 1,
                "tries": [1],
                "accelerator_seconds": {GPU: 3600},
                "cpu_seconds": 10,
                "wall_seconds": 100,
                "queue_seconds": 5,
                "accelerator_hours": 1.0,
            },
        ),
        # a failed try, then a retry's new job: both count
        (
            [(1, "a", usage(1800, wasted=600)), (2, "b", usage(3600, queue=20))],
            {
                "jobs": 2,
                "tries": [1, 2],
                "accelerator_seconds": {GPU: 5400},
                "wasted_accelerator_seconds": {GPU: 600},
                "cpu_seconds": 20,
                "wall_seconds": 200,
                "queue_seconds": 20,
                "accelerator_hours": 1.5,
            },
        ),
        # a retry that delivers the same job again: counted once, as the later try saw it
        ([(1, "a", usage(3600)), (2, "a", usage(3600))], {"jobs": 1, "tries": [2], "accelerator_seconds": {GPU: 3600}}),
        # a Clear (a new series) runs a job anew: both count
        ([(1, "a", usage(3600)), (3, "c", usage(7200))], {"jobs": 2, "tries": [1, 3], "accelerator_hours": 3.0}),
        # nothing recorded
        ([], {"jobs": 0, "tries": [], "accelerator_seconds": {}, "cpu_seconds": 0, "accelerator_hours": 0.0}),
    ],
)
def test_totals_over_tries(steps: list[tuple[int, str, dict[str, Any]]], expected: dict[str, Any]) -> None:
    history: Any = None
    for try_number, uid, used in steps:
        history = taskcost.record(history, try_number, uid, used)
    totals = taskcost.total(history)
    for key, value in expected.items():
        assert totals[key] == value, (key, totals)


@pytest.mark.parametrize(
    "stored",
    [
        "not a list",
        [{"uid": "a"}],  # no try
        [{"uid": "", "try": 1}],
        [{"uid": "a", "try": True}],
        [{"uid": "a", "try": 1, "cpu_seconds": -5, "accelerator_seconds": {GPU: "x"}}],  # written by the task's own code
    ],
)
def test_what_the_store_holds_is_checked(stored: Any) -> None:
    totals = taskcost.total(stored)
    assert totals["cpu_seconds"] == 0
    assert totals["accelerator_hours"] == 0


def test_the_record_is_bounded() -> None:
    history: Any = None
    for i in range(taskcost.MAX_JOBS + 5):
        history = taskcost.record(history, i + 1, f"u{i}", usage(1))
    assert len(history) == taskcost.MAX_JOBS
    assert history[0]["uid"] == "u5"


def test_describe() -> None:
    history = taskcost.record(taskcost.record(None, 1, "a", usage(1800, wasted=900)), 2, "b", usage(1800, queue=30))
    assert taskcost.describe(taskcost.total(history)) == (
        "2 jobs over tries 1, 2: nvidia.com/gpu 1 h (0.25 h wasted), 20 cpu-s, wall 200 s, queued 30 s"
    )


@pytest.mark.parametrize(
    ("created", "started", "queued"),
    [
        ("2026-01-01T00:00:00Z", "2026-01-01T00:02:05Z", 125),
        ("2026-01-01T00:00:00Z", None, None),  # not started: no queue time yet
        (None, "2026-01-01T00:02:05Z", None),
        ("2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z", 0),  # clocks apart: never negative
        ("garbage", "2026-01-01T00:00:00Z", None),
    ],
)
def test_queue_seconds(created: Any, started: Any, queued: Any) -> None:
    status = {"usage": {"runs": 1, "cpuSeconds": 1}, **({"startTime": started} if started else {})}
    assert usage_of(status, created).get("queue_seconds") == queued
    job = {"metadata": {"creationTimestamp": created}, "status": {**status, "phase": "Succeeded"}}
    assert interpret(job).usage.get("queue_seconds") == queued
