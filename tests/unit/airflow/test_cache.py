"""cache= (api/cache.py, operators/cache.py; issue 48 item 5): what the key follows, and what a
lookup delivers."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import Asset

from airflow_t9k.api import cache
from airflow_t9k.operators.cache import input_events
from airflow_t9k.operators.kinds import GenericJobOperator
from tests.support.task import FakeTI, Store


class Hook:
    def get_namespace(self) -> str:
        return "ml"


def rendered(run_id: str = "scheduled__1", **kw: Any) -> dict[str, Any]:
    kw.setdefault("image", "busybox")
    op = GenericJobOperator(task_id="train", namespace="ml", **kw)
    op._hook = Hook()
    return op.render_job({"ti": FakeTI(run_id=run_id)})


def key_of(job: dict[str, Any], events: list[list[str]] | None = None, version: str | None = None) -> str:
    return cache.key(cache.spec_key(job), cache.images_of(job), events or [], version)


BASE = key_of(rendered())


@pytest.mark.parametrize(
    ("what", "other", "same"),
    [
        ("another DAG run", key_of(rendered(run_id="scheduled__2")), True),
        (
            "another run with a checkpoint",
            key_of(rendered(run_id="r2", checkpoint="c/d")) == key_of(rendered(checkpoint="c/d")),
            None,
        ),
        ("another image", key_of(rendered(image="busybox:1.37")), False),
        ("a pinned image", key_of(rendered(image="busybox@sha256:" + "a" * 64)), False),
        ("another command", key_of(rendered(command=["python", "train.py"])), False),
        ("more replicas", key_of(rendered(replicas=2)), False),
        ("another env", key_of(rendered(env={"LR": "0.1"})), False),
        ("a cache_version", key_of(rendered(), version="2"), False),
        ("an asset event", key_of(rendered(), events=[["triggering", "s3://data", "7"]]), False),
    ],
)
def test_what_the_key_follows(what: str, other: Any, same: bool | None) -> None:
    if same is None:  # a comparison made in the table itself
        assert other is True, what
    else:
        assert (other == BASE) is same, what


def test_images_and_tags() -> None:
    job = rendered(image="busybox")
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["initContainers"] = [{"name": "i", "image": "r/x@sha256:" + "b" * 64}]
    assert cache.images_of(job) == ["busybox", "r/x@sha256:" + "b" * 64]
    assert cache.mutable(cache.images_of(job)) == ["busybox"]


@pytest.mark.parametrize(
    ("value", "hit"),
    [
        ({"key": BASE, "run_id": "r1", "job": {"uid": "u"}, "result": 1}, True),
        ({"key": "c0:old", "run_id": "r1", "job": {}}, False),  # another version of the key
        ({"key": BASE, "job": {}}, False),
        ({"key": BASE, "run_id": "r1", "job": "u"}, False),
        (None, False),
        ("text", False),
    ],
)
def test_matching(value: Any, hit: bool) -> None:
    assert (cache.matching(value, BASE) is not None) is hit


def test_input_events_are_the_triggering_ones_and_each_inlets_latest() -> None:
    asset = Asset("s3://data/day")
    event = SimpleNamespace(asset=asset, id=None, timestamp=datetime(2026, 12, 1, tzinfo=timezone.utc), source_dag_id="ingest",
                            source_run_id="r9", source_task_id="load", source_map_index=-1, extra={"rows": 10})  # fmt: skip
    inlet = Asset("s3://features")
    latest = SimpleNamespace(id=42, timestamp="t", source_dag_id=None, source_run_id=None, source_task_id=None,
                             source_map_index=None, extra=None)  # fmt: skip
    context = {"triggering_asset_events": {asset: [event]}, "inlet_events": {inlet: [latest]}}
    out = input_events(context, [inlet, SimpleNamespace(uri=None)])
    assert out == [["triggering", "s3://data/day", "", "2026-12-01 00:00:00+00:00", "ingest", "r9", "load", "-1", '{"rows": 10}'],
                   ["inlet", "s3://features/", "42", "t", "", "", "", "", ""]]  # Asset normalises its uri  # fmt: skip
    assert input_events({"inlet_events": {inlet: []}}, [inlet]) == [["inlet", "s3://features/", "no event"]]


class PullingTI(FakeTI):
    def __init__(self, earlier: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.earlier = earlier
        self.pulls: list[dict[str, Any]] = []

    def xcom_pull(self, **kw: Any) -> Any:
        self.pulls.append(kw)
        return self.earlier


def cached_op(**kw: Any) -> GenericJobOperator:
    op = GenericJobOperator(task_id="train", image="busybox", namespace="ml", cache=True, **kw)
    op._hook = Hook()
    op._series_start = 1
    return op


def test_a_hit_delivers_the_earlier_runs_outcome_without_a_job() -> None:
    op = cached_op()
    job = op.render_job({"ti": FakeTI(run_id="r2")})
    store = Store()
    earlier = {"key": key_of(job), "run_id": "r1", "job": {"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u1"},
               "result": {"metric": 0.9}, "metrics": {"loss": 0.1}, "checkpoint_location": {"volume": "c"}}  # fmt: skip
    ti = PullingTI(earlier, run_id="r2")
    context = {"ti": ti, "task_state_store": store}
    found = op._cached(context, job)
    assert found is earlier
    assert ti.pulls == [{"task_ids": "train", "key": "t9k_cache", "include_prior_dates": True, "map_indexes": -1}]
    assert store[cache.KEY_STATE] == earlier["key"]
    op._emit_assets = lambda *a: None
    out = op._deliver_cached(context, found, job)
    assert out["cached_from"] == "r1"
    assert ti.xcom["result"] == {"metric": 0.9}
    assert ti.xcom["metrics"] == {"loss": 0.1}
    assert ti.xcom["checkpoint_location"] == {"volume": "c"}
    assert ti.xcom["t9k_cache"]["hit"] is True


@pytest.mark.parametrize(
    ("series_start", "earlier_key", "earlier_run", "hit"),
    [
        (1, "same", "r1", True),
        (3, "same", "r1", False),  # a Clear trains again
        (1, "c1:other", "r1", False),
        (1, "same", "r2", False),  # this run's own record is no earlier run
    ],
)
def test_when_it_trains(series_start: int, earlier_key: str, earlier_run: str, hit: bool) -> None:
    op = cached_op()
    op._series_start = series_start
    job = op.render_job({"ti": FakeTI(run_id="r2")})
    key = key_of(job) if earlier_key == "same" else earlier_key
    ti = PullingTI({"key": key, "run_id": earlier_run, "job": {"uid": "u"}}, run_id="r2")
    store = Store()
    assert (op._cached({"ti": ti, "task_state_store": store}, job) is not None) is hit
    assert store[cache.KEY_STATE] == key_of(job)  # kept for this try's success, a Clear's too


def test_a_success_records_its_key_and_what_it_delivered() -> None:
    op = cached_op()
    ti = FakeTI(run_id="r2")
    store = Store({cache.KEY_STATE: "c1:k", "t9k_checkpoint": {"uid": "u2", "location": {"volume": "c", "sub_path": "d"}}})
    op._cache_success({"ti": ti, "task_state_store": store}, {"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u2"},
                      {"metric": 1, "checkpoint": "s3://ckpt/7"}, {"loss": 0.2})  # fmt: skip
    record = ti.xcom["t9k_cache"]
    assert (record["key"], record["run_id"], record["job"]["uid"]) == ("c1:k", "r2", "u2")
    assert (record["result"], record["metrics"]) == ({"metric": 1, "checkpoint": "s3://ckpt/7"}, {"loss": 0.2})
    assert (record["checkpoint"], record["checkpoint_location"]) == ("s3://ckpt/7", {"volume": "c", "sub_path": "d"})


def test_the_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="cache must be True or False"):
        GenericJobOperator(task_id="t", image="i", cache="yes")
    with pytest.raises(ValueError, match="cache_version must be a string"):
        GenericJobOperator(task_id="t", image="i", cache=True, cache_version=2)
