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


# Approval of a close win (approve_below=): the request, the answers, the champion changing meanwhile.


@pytest.mark.parametrize(
    ("promoted", "margin", "below", "asks"),
    [
        (True, 0.004, 0.01, True),  # a close win asks
        (True, 0.01, 0.01, False),  # by the threshold or more: no
        (True, 0.2, 0.01, False),
        (True, None, 0.01, False),  # the first champion never asks
        (False, 0.004, 0.01, False),  # a loss needs nobody
        (True, 0.004, None, False),  # approve_below unset: never
    ],
)
def test_needs_approval(promoted: bool, margin: float | None, below: float | None, asks: bool) -> None:
    assert promotion.needs_approval(promotion.Decision(promoted, margin, ""), below) is asks


@pytest.mark.parametrize(
    ("event", "answer"),
    [
        (
            {"chosen_options": ["Promote"], "responded_by_user": {"id": "7", "name": "ana"}, "timedout": False},
            {"chosen": "Promote", "by": "ana", "timed_out": False},
        ),
        (
            {"chosen_options": ["Keep the champion"], "responded_by_user": None, "timedout": True},
            {"chosen": "Keep the champion", "by": None, "timed_out": True},
        ),
        ({"chosen_options": ["Promote", "Keep the champion"]}, {"chosen": None, "by": None, "timed_out": False}),
        ({"error": "timeout has passed", "error_type": "timeout"}, {"chosen": None, "error": "timeout has passed"}),
        (None, {"chosen": None, "by": None}),
    ],
)
def test_answer(event: Any, answer: dict[str, Any]) -> None:
    got = promotion.answer(event)
    assert {k: got[k] for k in answer} == answer


def approving(monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> tuple[PromoteOperator, list[dict[str, Any]]]:
    import airflow_t9k.operators.promote as module

    requests: list[dict[str, Any]] = []
    monkeypatch.setattr(module, "upsert_hitl_detail", lambda **kw: requests.append(kw))
    return PromoteOperator(task_id="promote", asset=MODEL, metric="acc", candidate_task_id="train", approve_below=0.01,
                           **kwargs), requests  # fmt: skip


def ask(op: PromoteOperator, candidate: Any, state: State) -> tuple[Any, dict[str, Any], TI]:
    from airflow.sdk.exceptions import TaskAwaitingInput

    ti = TI(candidate)
    events = {MODEL: SimpleNamespace(extra=None)}
    context = {"ti": ti, "task_instance": SimpleNamespace(id="ti-1"), "dag_run": SimpleNamespace(run_type="manual"),
               "asset_state_store": {MODEL: state}, "outlet_events": events}  # fmt: skip
    with pytest.raises(TaskAwaitingInput) as parked:
        op.execute(context)
    assert parked.value.method_name == "execute_complete"
    return parked.value, context, ti


def test_a_close_win_waits_for_a_person_with_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import timedelta

    op, requests = approving(monkeypatch, approval_timeout=timedelta(hours=8), approvers={"id": "7", "name": "ana"})
    state = State(champion={"metric": 0.8, "run_id": "r1", "model_uri": "s3://m/1"})
    parked, _, ti = ask(op, {"acc": 0.805, "model_uri": "s3://m/2"}, state)
    assert parked.timeout == timedelta(hours=8)
    (request,) = requests
    assert request["ti_id"] == "ti-1"
    assert request["options"] == ["Promote", "Keep the champion"]
    assert request["defaults"] == ["Keep the champion"]  # the timeout keeps the champion unless told otherwise
    assert request["assigned_users"] == [{"id": "7", "name": "ana"}]
    assert "acc 0.8050, champion 0.8000" in request["subject"]
    assert "by **0.005**" in request["body"]
    assert "| champion | 0.8000 | r1 |" in request["body"]
    assert ti.xcom["promotion"]["promoted"] is None  # pending, not decided
    assert state["champion"]["run_id"] == "r1"  # nothing written yet
    assert "champion_history" not in state


@pytest.mark.parametrize(
    ("default", "event", "promoted", "why"),
    [
        ("keep", {"chosen_options": ["Promote"], "responded_by_user": {"id": "7", "name": "ana"}}, True, "approved by ana"),
        (
            "keep",
            {"chosen_options": ["Keep the champion"], "responded_by_user": {"id": "8", "name": "bo"}},
            False,
            "bo chose 'Keep the champion'",
        ),
        ("keep", {"chosen_options": ["Keep the champion"], "timedout": True}, False, "no answer within 1:00:00"),
        ("promote", {"chosen_options": ["Promote"], "timedout": True}, True, "the default is to promote"),
        ("keep", {"error": "no response", "error_type": "timeout"}, False, "no usable answer (no response)"),
    ],
)
def test_the_answer_decides(monkeypatch: pytest.MonkeyPatch, default: str, event: dict[str, Any], promoted: bool,
                            why: str) -> None:  # fmt: skip
    from datetime import timedelta

    op, _ = approving(monkeypatch, approval_default=default, approval_timeout=timedelta(hours=1))
    state = State(champion={"metric": 0.8, "run_id": "r1"})
    parked, context, ti = ask(op, {"acc": 0.805}, state)
    if promoted:
        out = op.execute_complete(context, event=event, **parked.kwargs)
        assert out["promoted"] is True
        assert why in out["why"]
        assert (state["champion"]["run_id"], state["champion"]["metric"]) == ("r2", 0.805)
        assert context["outlet_events"][MODEL].extra["previous_metric"] == 0.8
    else:
        with pytest.raises(AirflowSkipException, match=re.escape(why)):
            op.execute_complete(context, event=event, **parked.kwargs)
        assert state["champion"]["run_id"] == "r1"
    assert ti.xcom["promotion"]["approval"]["chosen"] in ("Promote", "Keep the champion", None)
    assert [d["promoted"] for d in state["champion_history"]] == [promoted]


@pytest.mark.parametrize(
    ("meanwhile", "promoted", "why"),
    [
        ({"metric": 0.7, "run_id": "other"}, True, "the champion changed while the approval was pending"),  # now a clear win
        ({"metric": 0.802, "run_id": "other"}, False, "a new approval would be needed"),  # still close: not this approval's
        ({"metric": 0.9, "run_id": "other"}, False, "does not beat 0.9000 of other"),  # now a loss
    ],
)
def test_an_approval_for_another_champion_is_not_used(monkeypatch: pytest.MonkeyPatch, meanwhile: dict[str, Any],
                                                      promoted: bool, why: str) -> None:  # fmt: skip
    op, _ = approving(monkeypatch)
    state = State(champion={"metric": 0.8, "run_id": "r1"})
    parked, context, _ = ask(op, {"acc": 0.805}, state)
    state["champion"] = meanwhile  # another DAG promoted into the asset while the person was asked
    yes = {"chosen_options": ["Promote"], "responded_by_user": {"id": "7", "name": "ana"}}
    if promoted:
        assert why in op.execute_complete(context, event=yes, **parked.kwargs)["why"]
        assert state["champion"]["run_id"] == "r2"
    else:
        with pytest.raises(AirflowSkipException, match=re.escape(why)):
            op.execute_complete(context, event=yes, **parked.kwargs)
        assert state["champion"] == meanwhile
    assert state["champion_history"][-1]["champion_before_run"] == "other"


def test_a_resume_after_its_own_write_ends_as_the_promotion_did(monkeypatch: pytest.MonkeyPatch) -> None:
    op, _ = approving(monkeypatch)
    state = State(champion={"metric": 0.8, "run_id": "r1"})
    parked, context, _ = ask(op, {"acc": 0.805}, state)
    yes = {"chosen_options": ["Promote"], "responded_by_user": {"id": "7", "name": "ana"}}
    op.execute_complete(context, event=yes, **parked.kwargs)
    again = op.execute_complete(context, event=yes, **parked.kwargs)  # the same resume once more
    assert again["promoted"] is True
    assert len(state["champion_history"]) == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"approve_below": 0}, "approve_below must be a positive number"),
        ({"approve_below": True}, "approve_below must be a positive number"),
        ({"approve_below": 0.1, "approval_default": "approve"}, "approval_default must be 'keep' or 'promote'"),
        ({"approve_below": 0.1, "approval_timeout": 60}, "approval_timeout must be a positive timedelta"),
        ({"approve_below": 0.1, "approvers": [{"id": "7"}]}, "approvers must be Airflow users"),
    ],
)
def test_approval_arguments_are_checked(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        PromoteOperator(task_id="p", asset=MODEL, metric="acc", candidate_task_id="train", **kwargs)
