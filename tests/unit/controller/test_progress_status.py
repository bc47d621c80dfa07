"""reconcile/reporting.py: status.progress from the reporting replica's values; rate-limited,
bounded, with a history for a chart and an ETA."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timezone
from typing import Any

import pytest

from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.controller.reconcile.reporting import (
    HISTORY_POINTS,
    MAX_BYTES,
    duration,
    eta_seconds,
    fold,
    history,
    percent,
    summary,
)
from airflow_t9k.kinds.kubeflow_status import to_core
from tests.builders import at, generic, ts

Obj = dict[str, Any]


def report(t: float, **values: Any) -> Obj:
    return {"replica": "job-worker-0", "time": ts(t), "values": values}


RUNNING = {"phase": "Running"}


# -- the pieces ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45.4, "45s"), (60, "1m"), (150, "2m30s"), (599, "9m59s"), (750, "12m"), (3600, "1h"), (7500, "2h5m"),
     (86400, "1d"), (273600, "3d4h"), (-5, "0s")],
)  # fmt: skip
def test_duration_as_kubectl_shows_ages(seconds, text):
    assert duration(seconds) == text


@pytest.mark.parametrize(
    ("values", "pct", "text"),
    [
        ({"step": 120, "totalSteps": 1000}, 12.0, "12% 120/1000"),
        ({"step": 1, "totalSteps": 3}, 33.3, "33.3% 1/3"),
        ({"step": 1200, "totalSteps": 1000}, 100.0, "100% 1200/1000"),  # past the total: capped
        ({"epoch": 2, "totalEpochs": 5}, 40.0, "40% epoch 2/5"),
        ({"step": 7, "epoch": 1, "totalEpochs": 4}, 25.0, "25% step 7"),  # epochs when steps have no total
        ({"step": 7}, None, "step 7"),
        ({"epoch": 1.5}, None, "epoch 1.5"),
        ({"metrics": {"loss": 1}}, None, ""),
    ],
)
def test_percent_and_the_progress_column(values, pct, text):
    assert percent(values) == pct
    if pct is not None:
        values = {**values, "percent": pct}
    assert summary(values) == text


def points(*steps_at: tuple[float, int]) -> list[Obj]:
    return [{"time": ts(t), "step": s} for t, s in steps_at]


@pytest.mark.parametrize(
    ("values", "history_points", "eta"),
    [
        ({"step": 200, "totalSteps": 1000}, points((0, 0), (100, 200)), 400.0),  # 2 steps/s, 800 to go
        ({"step": 200, "totalSteps": 1000}, points((0, 0), (50, 20), (100, 200)), 400.0),  # both within the window
        # only the last ETA_WINDOW (300 s): early slow steps do not count
        ({"step": 700, "totalSteps": 1000}, points((0, 0), (600, 100), (700, 700)), 50.0),
        # since the count last went back (a restart from a checkpoint)
        ({"step": 150, "totalSteps": 1000}, points((0, 0), (100, 500), (110, 100), (160, 150)), 850.0),
        ({"step": 200, "totalSteps": 1000}, points((100, 200)), None),  # one point: no rate
        ({"step": 200, "totalSteps": 1000}, points((0, 200), (100, 200)), None),  # no progress: no rate
        ({"step": 200}, points((0, 0), (100, 200)), None),  # no total
        ({"epoch": 2, "totalEpochs": 4}, [{"time": ts(0), "epoch": 0}, {"time": ts(600), "epoch": 2}], 600.0),
        ({"step": 1000, "totalSteps": 1000}, points((0, 0), (100, 1000)), 0.0),
    ],
)
def test_eta_from_the_recent_rate(values, history_points, eta):
    assert eta_seconds(values, history_points) == eta


def test_history_moves_its_last_point_until_every_seconds_passed():
    h = None
    for t, step in ((0, 0), (10, 10), (12, 12), (15, 15), (21, 21)):
        h = history(h, {"reportedAt": ts(t), "step": step}, 10)
    # 10 is 10 s after 0: it stays, 12 gets a new point; 15 and 21 take 12's place (less than
    # 10 s after 10); at 25 the last point (21) is 11 s after 10: it stays and 25 is appended.
    assert [p["step"] for p in h["points"]] == [0, 10, 21]
    h = history(h, {"reportedAt": ts(25), "step": 25}, 10)
    assert [p["step"] for p in h["points"]] == [0, 10, 21, 25]
    assert h["every"] == 10


def test_history_stays_within_its_points_over_a_long_run_and_spans_it():
    h = None
    for i in range(5000):  # 5000 writes 10 s apart: almost 14 hours
        h = history(h, {"reportedAt": ts(10 * i), "step": i, "metrics": {"loss": 1 / (i + 1)}}, 10)
    pts = h["points"]
    assert len(pts) <= HISTORY_POINTS
    assert pts[0]["step"] == 0
    assert pts[-1]["step"] == 4999
    gaps = [b["step"] - a["step"] for a, b in itertools.pairwise(pts)]
    assert max(gaps[:-1]) <= 2 * min(gaps[:-1])  # evenly spread (the last gap may be shorter)
    assert h["every"] >= 5000 * 10 / HISTORY_POINTS


# -- fold: the rate limit -------------------------------------------------------------------


def test_first_values_are_written_at_once():
    status, wait = fold(RUNNING, RUNNING, report(0, step=1, total_steps=100, metrics={"loss": 2.0}), 10, at(1))
    p = status["progress"]
    assert wait is None
    assert {k: p[k] for k in ("replica", "step", "totalSteps", "percent", "summary", "metrics", "reportedAt", "updated")} == {
        "replica": "job-worker-0", "step": 1, "totalSteps": 100, "percent": 1.0, "summary": "1% 1/100",
        "metrics": {"loss": 2.0}, "reportedAt": ts(0), "updated": ts(1)}  # fmt: skip
    assert p["history"] == {"every": 10, "points": [{"time": ts(0), "step": 1, "metrics": {"loss": 2.0}}]}


def test_new_values_within_the_interval_wait_and_the_plan_comes_back_when_due():
    first, _ = fold(RUNNING, RUNNING, report(0, step=1), 10, at(0))
    status, wait = fold(first, dict(first), report(3, step=5), 10, at(3))
    assert status["progress"] == first["progress"]  # unchanged: no write
    assert wait == pytest.approx(7)
    status, wait = fold(first, dict(first), report(3, step=5), 10, at(10))
    assert (status["progress"]["step"], status["progress"]["updated"], wait) == (5, ts(10), None)


def test_at_most_one_write_per_interval_however_often_values_change():
    """A replica printing every 100 ms for a minute; a pass every 100 ms: 6 writes at 10 s."""
    status: Obj = dict(RUNNING)
    writes = 0
    for i in range(600):
        now = at(i / 10)
        new, _ = fold(status, {k: v for k, v in status.items()}, report(i / 10, step=i, total_steps=600), 10, now)
        if new.get("progress") != status.get("progress"):
            writes += 1
            status = new
    assert writes == 6


def test_nothing_new_changes_nothing_whatever_the_time():
    first, _ = fold(RUNNING, RUNNING, report(0, step=1, metrics={"loss": 1.0}), 10, at(0))
    again = dict(first)
    for later in (1, 11, 1000):
        status, wait = fold(first, again, report(0, step=1, metrics={"loss": 1.0}), 10, at(later))
        assert status is again
        assert wait is None


def test_no_report_leaves_status_alone_and_a_controller_restart_loses_nothing():
    first, _ = fold(RUNNING, RUNNING, report(0, step=1), 10, at(0))
    new = dict(first)
    assert fold(first, new, None, 10, at(50)) == (new, None)


def test_the_pass_that_ends_the_job_takes_the_latest_at_once_without_eta():
    first, _ = fold(RUNNING, RUNNING, report(0, step=0, total_steps=100), 10, at(0))
    running, _ = fold(first, dict(first), report(5, step=50, total_steps=100), 10, at(5))
    assert running["progress"]["step"] == 0  # rate-limited while running
    ending = {**first, "phase": "Succeeded"}
    status, wait = fold(first, ending, report(8, step=100, total_steps=100, metrics={"acc": 0.97}), 10, at(8))
    p = status["progress"]
    assert (p["step"], p["percent"], p["metrics"], wait) == (100, 100.0, {"acc": 0.97}, None)
    assert "eta" not in p


def test_eta_is_dropped_when_the_phase_leaves_running():
    first, _ = fold(RUNNING, RUNNING, report(0, step=0, total_steps=100), 10, at(0))
    second, _ = fold(first, dict(first), report(10, step=10, total_steps=100), 10, at(10))
    assert second["progress"]["eta"] == "1m30s"
    assert second["progress"]["etaSeconds"] == 90
    paused = {**second, "phase": "Paused"}
    status, _ = fold(second, paused, None, 10, at(11))
    assert "eta" not in status["progress"]
    assert "etaSeconds" not in status["progress"]
    assert status["progress"]["step"] == 10


def test_a_finished_job_still_takes_lines_read_after_its_end_rate_limited():
    done = {"phase": "Succeeded"}
    first, _ = fold(done, dict(done), report(0, step=99), 10, at(0))
    status, wait = fold(first, dict(first), report(1, step=100), 10, at(2))
    assert status["progress"]["step"] == 99
    assert wait == pytest.approx(8)
    status, wait = fold(first, dict(first), report(1, step=100), 10, at(10))
    assert status["progress"]["step"] == 100
    assert wait is None


# -- fold: bounded ----------------------------------------------------------------------------


def test_progress_stays_under_max_bytes_whatever_the_metrics():
    metrics = {f"metric_with_a_rather_long_name_{i:02d}_{'x' * 20}": 0.123456 + i for i in range(16)}
    status: Obj = dict(RUNNING)
    for i in range(400):
        status, _ = fold(status, dict(status), report(10 * i, step=i, total_steps=10_000, metrics=metrics), 10, at(10 * i))
        size = len(json.dumps(status["progress"], separators=(",", ":")))
        assert size <= MAX_BYTES, (i, size)
    hist = status["progress"]["history"]["points"]
    assert 2 <= len(hist) <= HISTORY_POINTS
    assert hist[0]["step"] == 0
    assert hist[-1]["step"] == 399
    assert len(status["progress"]["metrics"]) == 16
    assert all(len(p.get("metrics", {})) <= 8 for p in hist)


def test_typical_progress_keeps_fifty_points_in_a_few_kilobytes():
    status: Obj = dict(RUNNING)
    for i in range(1000):
        status, _ = fold(status, dict(status), report(10 * i, step=10 * i, total_steps=20_000, epoch=i // 100,
                                                      metrics={"loss": 2 / (i + 1), "acc": i / 1000}), 10,
                         at(10 * i))  # fmt: skip
    assert len(status["progress"]["history"]["points"]) > HISTORY_POINTS // 2
    assert len(json.dumps(status["progress"])) < MAX_BYTES


# -- through plan() -----------------------------------------------------------------------------


def pod(name: str, phase: str = "Running") -> Obj:
    state = (
        {"running": {"startedAt": ts(0)}}
        if phase == "Running"
        else {"terminated": {"exitCode": 0, "startedAt": ts(0), "finishedAt": ts(30)}}
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
            "labels": {"batch.tensorstack.dev/replica-type": "worker"},
                                                            "annotations": {"batch.tensorstack.dev/restart-count": "0"}},
            "spec": {"containers": [{"name": "main", "image": "img"}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "main", "state": state}]}}  # fmt: skip


def test_plan_writes_progress_with_the_pass_and_asks_to_come_back_for_values_that_wait():
    job = generic("job", ("worker", 2))
    observed = Observed.of(pod("job-worker-0"), pod("job-worker-1"))
    first = plan(job, observed, at(1))
    job["status"] = first.status
    assert first.status["phase"] == "Running"
    assert "progress" not in first.status
    with_values = Observed(observed.pods, report=report(2, step=10, total_steps=100), progress_interval=10)
    second = plan(job, with_values, at(2))
    assert second.status["progress"]["summary"] == "10% 10/100"
    job["status"] = second.status
    third = plan(job, Observed(observed.pods, report=report(4, step=20, total_steps=100), progress_interval=10), at(4))
    assert third.status == second.status
    assert third.requeue_after == pytest.approx(8)
    fourth = plan(job, Observed(observed.pods, report=report(4, step=20, total_steps=100), progress_interval=10), at(12))
    assert fourth.status["progress"]["step"] == 20
    assert fourth.requeue_after is None


def test_plan_of_a_job_being_deleted_writes_no_progress():
    job = generic("job", ("worker", 1))
    job["metadata"]["deletionTimestamp"] = ts(0)
    result = plan(job, Observed(Observed.of(pod("job-worker-0")).pods, report=report(1, step=1)), at(1))
    assert "progress" not in result.status


def test_ascendjob_keeps_progress_in_its_kubeflow_status():
    status = {"conditions": [{"type": "Running", "status": "True"}], "progress": {"step": 3}}
    assert to_core(status)["progress"] == {"step": 3}


# -- what Kubeflow Trainer's body adds: the program's own percent and ETA -----------------------


def test_a_reported_percent_without_steps_is_the_progress_column():
    status, _ = fold(RUNNING, RUNNING, report(0, percent=45, metrics={"loss": 0.2}), 10, at(1))
    p = status["progress"]
    assert (p["percent"], p["summary"], p["metrics"]) == (45.0, "45%", {"loss": 0.2})


def test_steps_with_a_total_win_over_a_reported_percent():
    status, _ = fold(RUNNING, RUNNING, report(0, percent=99, step=30, total_steps=100), 10, at(1))
    assert (status["progress"]["percent"], status["progress"]["summary"]) == (30.0, "30% 30/100")


def test_a_reported_eta_is_used_only_while_no_rate_is_known_and_only_while_running():
    first, _ = fold(RUNNING, RUNNING, report(0, percent=10, eta_seconds=900), 10, at(0))
    assert (first["progress"]["eta"], first["progress"]["etaSeconds"]) == ("15m", 900)
    # Steps with a total and two points of history: the measured rate wins.
    a, _ = fold(RUNNING, RUNNING, report(0, step=0, total_steps=100, eta_seconds=5), 10, at(0))
    b, _ = fold(a, dict(a), report(10, step=10, total_steps=100, eta_seconds=5), 10, at(10))
    assert b["progress"]["etaSeconds"] == 90
    done, _ = fold(first, {"phase": "Succeeded"}, report(5, percent=100, eta_seconds=0), 10, at(5))
    assert "eta" not in done["progress"]
    assert "etaSeconds" not in done["progress"]


def test_the_same_pushed_report_again_changes_nothing():
    values = {"percent": 45, "eta_seconds": 120, "step": 3, "metrics": {"loss": 0.2}}
    first, _ = fold(RUNNING, RUNNING, report(0, **values), 10, at(0))
    for later in (1, 30, 3000):
        status, wait = fold(first, dict(first), report(0, **values), 10, at(later))
        assert (status, wait) == (first, None)


@pytest.mark.parametrize(
    ("earlier", "latest", "total"),
    [
        (1e-300, 2e-300, 1e308),  # a rate of 1e-300 epochs a second: infinite
        (0, 5e-324, 1.0),  # the smallest float: the rate underflows to zero
        (0.0, 1e-9, 1e12),  # finite but past any use (thousands of years)
    ],
    ids=["infinite", "underflow", "absurd"],
)
def test_a_line_sequence_that_makes_the_eta_infinite_shows_none_and_plans_on(earlier, latest, total):
    """Issue 29, 8: before, the status' ETA was int(round(inf)) and every pass of the job failed."""
    from airflow_t9k.controller.reconcile.reporting import progress_status

    old = {"history": {"every": 10, "points": [{"time": "2026-01-01T00:00:00Z", "epoch": 0},
                                                {"time": "2026-01-01T00:00:30Z", "epoch": earlier}]}}  # fmt: skip
    report = {"replica": "r", "time": "2026-01-01T00:01:00Z", "values": {"epoch": latest, "total_epochs": total}}
    out = progress_status(old, report, 10, datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc), running=True)
    assert "eta" not in out
    assert "etaSeconds" not in out
    assert out["epoch"] == latest


@pytest.mark.parametrize("eta", [float("inf"), 1e308, -5.0, float("nan")])
def test_a_reported_eta_that_is_no_estimate_is_none(eta):
    """Issue 29, 8: the program's own ETA (a pushed report) is bounded as the measured one is."""
    status, _ = fold(RUNNING, RUNNING, report(0, percent=10, eta_seconds=eta), 10, at(0))
    assert "eta" not in status["progress"]
    assert "etaSeconds" not in status["progress"]
