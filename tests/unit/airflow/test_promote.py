"""PromoteOperator and the champion decision (api/promotion.py, operators/promote.py; issue 48 item 2)."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowException, AirflowSkipException

from airflow_t9k.api import promotion
from airflow_t9k.operators.promote import PromoteOperator

MODEL = Asset("s3://models/churn")


@pytest.mark.parametrize(
    ("candidate", "champion", "higher", "minimum", "promoted", "margin"),
    [
        (0.9, None, True, 0.0, True, None),  # the first candidate
        (0.9, {"metric": 0.8, "run_id": "r1"}, True, 0.0, True, pytest.approx(0.1)),
        (0.8, {"metric": 0.8}, True, 0.0, False, 0.0),  # a tie keeps the champion
        (0.85, {"metric": 0.8}, True, 0.1, False, pytest.approx(0.05)),  # not by enough
        (0.2, {"metric": 0.3}, False, 0.0, True, pytest.approx(0.1)),  # a loss: lower is better
        (0.4, {"metric": 0.3}, False, 0.0, False, pytest.approx(-0.1)),
        (0.5, {"metric": "high"}, True, 0.0, True, None),  # an unusable champion is none
        (0.5, {"metric": float("nan")}, True, 0.0, True, None),
    ],
)
def test_decide(candidate: float, champion: Any, higher: bool, minimum: float, promoted: bool, margin: Any) -> None:
    d = promotion.decide(candidate, champion, "acc", higher, minimum)
    assert (d.promoted, d.margin) == (promoted, margin)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"acc": 0.9}, None),
        ({"acc": 1}, None),
        ({"loss": 0.9}, "has no metric 'acc'; it has ['loss']"),
        ({"acc": "0.9"}, "not a finite number"),
        ({"acc": True}, "not a finite number"),
        ({"acc": float("inf")}, "not a finite number"),
        ([0.9], "not a dict"),
        (None, "not a dict"),
    ],
)
def test_metric_of(value: Any, error: str | None) -> None:
    if error is None:
        assert promotion.metric_of(value, "acc") == float(value["acc"])
    else:
        with pytest.raises(ValueError, match=re.escape(error)):
            promotion.metric_of(value, "acc")


class State(dict):
    def set(self, key: str, value: Any) -> None:
        self[key] = value


class TI:
    def __init__(self, candidate: Any, run_id: str = "r2") -> None:
        self.dag_id, self.run_id, self.task_id, self.candidate = "d", run_id, "promote", candidate
        self.xcom: dict[str, Any] = {}

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        assert (task_ids, key) == ("train", "result")
        return self.candidate

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def run(candidate: Any, state: State, run_type: str = "manual", run_id: str = "r2") -> tuple[Any, dict[str, Any]]:
    op = PromoteOperator(task_id="promote", asset=MODEL, metric="acc", candidate_task_id="train")
    events = {MODEL: SimpleNamespace(extra=None)}
    ti = TI(candidate, run_id)
    context = {"ti": ti, "dag_run": SimpleNamespace(run_type=run_type), "asset_state_store": {MODEL: state},
               "outlet_events": events}  # fmt: skip
    out = op.execute(context)
    return out, {"xcom": ti.xcom, "extra": events[MODEL].extra}


def test_a_better_candidate_is_recorded_before_its_event() -> None:
    state = State(champion={"metric": 0.8, "run_id": "r1", "model_uri": "s3://m/1"})
    out, seen = run({"acc": 0.9, "model_uri": "s3://m/2"}, state)
    assert out["promoted"] is True
    assert state["champion"]["metric"] == 0.9
    assert state["champion"]["model_uri"] == "s3://m/2"
    assert seen["extra"] == {"metric": 0.9, "model_uri": "s3://m/2", "previous_metric": 0.8, "margin": pytest.approx(0.1),
                             "run_id": "r2"}  # fmt: skip
    assert seen["xcom"]["promotion"]["champion_before_run"] == "r1"
    assert [d["promoted"] for d in state["champion_history"]] == [True]


def test_a_worse_candidate_skips_and_keeps_the_champion() -> None:
    state = State(champion={"metric": 0.95, "run_id": "r1"})
    with pytest.raises(AirflowSkipException, match="kept the production model: acc 0.9000 does not beat 0.9500 of r1"):
        run({"acc": 0.9}, state)
    assert state["champion"] == {"metric": 0.95, "run_id": "r1"}
    assert [d["promoted"] for d in state["champion_history"]] == [False]


def test_a_retry_after_the_write_ends_as_the_promotion_did() -> None:
    state = State()
    run({"acc": 0.7}, state)
    out, seen = run({"acc": 0.7}, state)  # the same run again: its own champion
    assert out["promoted"] is True
    assert seen["extra"]["metric"] == 0.7
    assert len(state["champion_history"]) == 1  # decided once


def test_a_backfill_never_promotes() -> None:
    with pytest.raises(AirflowSkipException, match="a backfill does not promote"):
        run({"acc": 0.99}, State(), run_type="backfill")


def test_a_candidate_without_the_metric_fails_clearly() -> None:
    with pytest.raises(AirflowException, match="train's XCom 'result': the candidate has no metric 'acc'"):
        run({"loss": 0.1}, State())


def test_one_instance_at_a_time_is_not_optional() -> None:
    op = PromoteOperator(task_id="p", asset=MODEL, metric="acc", candidate_task_id="train")
    assert op.max_active_tis_per_dag == 1
    assert MODEL in op.outlets
    with pytest.raises(ValueError, match="one instance at a time"):
        PromoteOperator(task_id="p", asset=MODEL, metric="acc", candidate_task_id="train", max_active_tis_per_dag=2)
    with pytest.raises(ValueError, match="min_improvement"):
        PromoteOperator(task_id="p", asset=MODEL, metric="acc", candidate_task_id="train", min_improvement=-1)
