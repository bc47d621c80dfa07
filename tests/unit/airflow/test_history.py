"""A task's history across DAG runs and regression_threshold (api/history.py, operators/history.py;
issue 48 item 1)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_t9k.api import history
from airflow_t9k.operators.kinds import GenericJobOperator
from tests.support.task import FakeTI


def test_values_are_the_reported_metrics_then_the_results_numbers() -> None:
    assert history.values_of({"loss": 0.2, "step": 100}, {"acc": 0.9, "loss": 9, "uri": "s3://m", "ok": True}) == {
        "loss": 0.2, "step": 100.0, "acc": 0.9}  # fmt: skip
    assert history.values_of(None, "text") == {}
    many = {f"m{i}": i for i in range(40)}
    assert len(history.values_of(many, None)) == history.MAX_METRICS


BEST = {"acc": {"value": 0.9, "run_id": "r1"}, "loss": {"value": 0.1, "run_id": "r2"}}


@pytest.mark.parametrize(
    ("values", "thresholds", "flagged"),
    [
        ({"acc": 0.85}, {"acc": 0.02}, ["acc"]),  # 0.05 behind, more than 0.02
        ({"acc": 0.89}, {"acc": 0.02}, []),  # within the threshold
        ({"acc": 0.95}, {"acc": 0.0}, []),  # better
        ({"acc": 0.85}, {}, []),  # no threshold: never flagged
        ({"loss": 0.2}, {"loss": 0.05}, ["loss"]),  # lower is better: 0.1 worse
        ({"loss": 0.05}, {"loss": 0.0}, []),
        ({"f1": 0.1}, {"f1": 0.0}, []),  # no earlier value to compare with
        ({}, {"acc": 0.0}, []),  # the run reported no such metric
    ],
)
def test_regressions(values: dict[str, float], thresholds: dict[str, float], flagged: list[str]) -> None:
    found = history.regressions(values, BEST, thresholds, lower_is_better=("loss",))
    assert [r["metric"] for r in found] == flagged
    for r in found:
        assert r["best_run"] == BEST[r["metric"]]["run_id"]


def test_the_best_is_carried_forward() -> None:
    best = history.carried({}, {"acc": 0.8, "loss": 0.3}, "r1", ("loss",))
    best = history.carried(best, {"acc": 0.7, "loss": 0.2}, "r2", ("loss",))
    assert best == {"acc": {"value": 0.8, "run_id": "r1"}, "loss": {"value": 0.2, "run_id": "r2"}}


@pytest.mark.parametrize("bad", [{"acc": -1}, {"acc": "x"}, ["acc"], {"acc": float("nan")}])
def test_thresholds_are_checked(bad: Any) -> None:
    with pytest.raises(ValueError, match="regression_threshold"):
        GenericJobOperator(task_id="t", image="i", regression_threshold=bad)


def test_what_the_ui_shows_of_a_record_is_typed_and_bounded() -> None:
    shown = history.for_display({"phase": "Succeeded" * 10, "metrics": {"acc": 0.9, "x" * 100: 1, "s": "no"}, "restarts": 2,
                                 "regressions": [{"metric": "acc", "value": 0.8, "best": 0.9}, {"metric": "y"}, "z"],
                                 "job": {"name": "train-1"}, "extra": "dropped"})  # fmt: skip
    assert shown is not None
    assert len(shown["phase"]) == 32
    assert shown["metrics"] == {"acc": 0.9, "x" * 64: 1.0}
    assert [r["metric"] for r in shown["regressions"]] == ["acc"]
    assert (shown["restarts"], shown["job"]) == (2, "train-1")
    assert "extra" not in shown
    assert history.for_display("text") is None


class PullingTI(FakeTI):
    def __init__(self, earlier: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.earlier = earlier

    def xcom_pull(self, **kw: Any) -> Any:
        assert kw == {"task_ids": "train", "key": "t9k_history", "include_prior_dates": True, "map_indexes": -1}
        return self.earlier


def event(status: str, metrics: dict[str, float], restarts: int = 0) -> dict[str, Any]:
    usage = {"wall_seconds": 100, "accelerator_hours": 1.5, "wasted_accelerator_seconds": {"g": 1800}}
    return {"status": status, "phase": "Succeeded" if status == "success" else "Failed",
            "state": {"metrics": metrics, "restarts": restarts, "usage": usage}}  # fmt: skip


def test_a_run_behind_the_best_earlier_one_is_flagged_in_the_log_and_xcom(capsys: pytest.CaptureFixture[str]) -> None:
    op = GenericJobOperator(task_id="train", image="i", regression_threshold={"acc": 0.02})
    op._task_total = {"accelerator_hours": 3.0, "tries": [1, 2]}  # what _finish summed (api/taskcost.py)
    ti = PullingTI({"best": {"acc": {"value": 0.9, "run_id": "scheduled__1"}}}, run_id="scheduled__2")
    op._record_history({"ti": ti}, {"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u"},
                       event("success", {"acc": 0.85}, restarts=2), {"uri": "s3://m"})  # fmt: skip
    record = ti.xcom["t9k_history"]
    assert record["metrics"] == {"acc": 0.85}
    assert (record["restarts"], record["wasted_hours"], record["accelerator_hours"]) == (2, 0.5, 1.5)
    assert (record["task_accelerator_hours"], record["tries"]) == (3.0, [1, 2])  # every try's, in the history too
    assert record["best"] == {"acc": {"value": 0.9, "run_id": "scheduled__1"}}  # still the earlier run's
    assert [r["metric"] for r in ti.xcom["regression"]] == ["acc"]
    assert "regression: acc 0.85 fell behind the best earlier run's 0.9 (scheduled__1) by 0.05" in capsys.readouterr().out


def test_a_failed_run_is_recorded_but_neither_judged_nor_the_best() -> None:
    op = GenericJobOperator(task_id="train", image="i", regression_threshold={"acc": 0.0})
    ti = PullingTI({"best": {"acc": {"value": 0.5, "run_id": "r1"}}}, run_id="r2")
    op._record_history({"ti": ti}, {"name": "j"}, event("failed", {"acc": 0.99}), None)
    assert ti.xcom["t9k_history"]["phase"] == "Failed"
    assert ti.xcom["t9k_history"]["best"]["acc"]["value"] == 0.5
    assert "regression" not in ti.xcom
