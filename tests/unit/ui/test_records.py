"""Which job a task submitted, read from a real Airflow metadata database (SQLite, Airflow's own
tables): the task instance must exist, and its job is the one it recorded in XCom t9k_job."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import ClassVar

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.orm import Session

from airflow_t9k.compat import attempts_are_rows
from airflow_t9k.ui.records import TaskRecord, recorded_uids, task_record
from tests.support.airflow_rows import add_attempts, add_ti, add_try, add_xcom

IDENTITY = {"kind": "GenericJob", "namespace": "team-a", "name": "train-1", "uid": "uid-1", "server": "https://k8s"}


@pytest.fixture(scope="module")
def engine():
    from airflow.models import import_all_models

    import_all_models()
    from airflow.models.base import Base

    eng = create_engine("sqlite://")
    event.listen(eng, "connect", lambda conn, _: conn.execute("PRAGMA foreign_keys=OFF"))
    Base.metadata.create_all(eng)
    return eng


@pytest.fixture
def session(engine) -> Iterator[Session]:
    with Session(engine) as s:
        yield s
        s.rollback()


CASES = [
    # (what is stored, the task asked about, expected)
    ("no task instance", [], ("d", "r", "t", -1), None),
    ("a DAG id Airflow does not know", [("d", "r", "t", -1, IDENTITY)], ("other", "r", "t", -1), None),
    ("task not yet submitted", [("d", "r", "t", -1, None)], ("d", "r", "t", -1), TaskRecord(None)),
    (
        "task recorded its job",
        [("d", "r", "t", -1, IDENTITY)],
        ("d", "r", "t", -1),
        TaskRecord({k: IDENTITY[k] for k in ("kind", "namespace", "name", "uid")}),
    ),
    ("another map index", [("d", "r", "t", 1, IDENTITY)], ("d", "r", "t", 2), None),
    (
        "a record without a uid is not trusted",
        [("d", "r", "t", -1, {**IDENTITY, "uid": ""})],
        ("d", "r", "t", -1),
        TaskRecord(None),
    ),
    ("a record that is not a dict", [("d", "r", "t", -1, "train-1")], ("d", "r", "t", -1), TaskRecord(None)),
]


@pytest.mark.parametrize(("stored", "key", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("raw", [False, True], ids=["json-string", "json-value"])
def test_task_record(session, stored, key, expected, raw):
    for dag, run, task, mi, xcom in stored:
        add_ti(session, dag, run, task, mi, xcom, raw=raw)
    assert task_record(session, key) == expected


def test_recorded_uids_in_one_query(engine, session):
    add_ti(session, "a", "r1", "t", -1, IDENTITY)
    add_ti(session, "a", "r1", "u", -1, {**IDENTITY, "uid": "uid-2"})
    add_ti(session, "a", "r2", "t", 3, {**IDENTITY, "uid": "uid-3"})
    add_ti(session, "b", "r1", "t", -1, {**IDENTITY, "uid": "uid-4"})  # not asked for
    statements: list[str] = []

    def seen(conn, cursor, statement, *_):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        found = recorded_uids(session, {("a", "r1", "t", -1), ("a", "r2", "t", 3), ("a", "r2", "t", -1)})
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert found == {("a", "r1", "t", -1): "uid-1", ("a", "r2", "t", 3): "uid-3"}
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 1
    assert recorded_uids(session, set()) == {}


def test_the_current_try_s_record_not_an_earlier_one_s(session):
    """Airflow 3.4 keeps each try's XCom (an earlier try's row archived with it): the tab and the
    jobs page read the current try's ``t9k_job`` only. On 3.3 the earlier try's XCom is gone."""
    add_try(session, "d", "r", "t", 1, "failed", xcom={**IDENTITY, "name": "train-1-old", "uid": "uid-old"})
    add_ti(session, "d", "r", "t", -1, IDENTITY, try_number=2)
    add_try(session, "d", "r", "t", 3, "failed", xcom={**IDENTITY, "name": "train-1-odd", "uid": "uid-odd"})  # order-proof
    assert task_record(session, ("d", "r", "t", -1)) == TaskRecord({k: IDENTITY[k] for k in ("kind", "namespace", "name", "uid")},
                                                                    try_number=2)  # fmt: skip
    assert recorded_uids(session, {("d", "r", "t", -1)}) == {("d", "r", "t", -1): "uid-1"}


def test_an_action_is_written_to_airflows_audit_log(session):
    from airflow.models.log import Log
    from sqlalchemy import select

    from airflow_t9k.ui.records import audit

    job = {"kind": "GenericJob", "metadata": {"namespace": "team-a", "name": "train-1", "uid": "uid-1"}}
    audit(session, user="carol", action="deleted", key=("d", "r", "t", 2), job=job, detail="GenericJob team-a/train-1 deleted")
    session.flush()
    row = session.scalars(select(Log).where(Log.event == "t9k.deleted")).one()
    assert (row.owner, row.dag_id, row.run_id, row.task_id, row.map_index) == ("carol", "d", "r", "t", 2)
    assert json.loads(row.extra) == {"kind": "GenericJob", "namespace": "team-a", "name": "train-1", "uid": "uid-1",
                                     "detail": "GenericJob team-a/train-1 deleted"}  # fmt: skip


def job_of(n: int) -> dict:
    return {"kind": "GenericJob", "namespace": "team-a", "name": f"train-1-t{n}", "uid": f"uid-{n}"}


TRY_CASES = [
    # (earlier tries (compat.earlier_tries), the task state store's t9k_jobs (JSON text), current try, expected (try, state, job))
    (
        "two earlier tries, newest first",
        {1: "failed", 2: "failed"},
        json.dumps([{"try": n, **job_of(n)} for n in (1, 2, 3)]),
        3,
        [(2, "failed", job_of(2)), (1, "failed", job_of(1))],
    ),
    ("a try that recorded no job", {1: "failed"}, json.dumps([{"try": 2, **job_of(2)}]), 2, [(1, "failed", None)]),
    ("no record in the store", {1: "failed"}, None, 2, [(1, "failed", None)]),
    ("a store value that is not JSON", {1: "failed"}, "{", 2, [(1, "failed", None)]),
    ("the first try has none", {}, json.dumps([{"try": 1, **job_of(1)}]), 1, []),
]


@pytest.mark.parametrize(("tries", "stored", "current", "expected"), [c[1:] for c in TRY_CASES], ids=[c[0] for c in TRY_CASES])
def test_earlier_tries(session, tries, stored, current, expected):
    from airflow_t9k.ui.records import earlier_tries

    for n, state in tries.items():
        add_try(session, "d", "r", "t", n, state)
    add_try(session, "d", "other-run", "t", 1, "success")  # another run's try: not this task instance's
    if stored is not None:
        add_attempts(session, "d", "r", "t", stored)
    got = earlier_tries(session, ("d", "r", "t", -1), current)
    assert [(e["try"], e["state"], e["job"]) for e in got] == expected


class OffloadedStore:
    """A ``[workers] state_store_backend`` that keeps values elsewhere: the table holds a reference."""

    kept: ClassVar[dict[str, object]] = {}

    def serialize_task_state_store_to_ref(self, *, value, key, scope):
        ref = f"mem://{scope.dag_id}/{scope.run_id}/{scope.task_id}/{key}"
        OffloadedStore.kept[ref] = value
        return ref

    def deserialize_task_state_store_from_ref(self, stored):
        return OffloadedStore.kept[stored]


def test_earlier_tries_are_read_through_the_state_store_backend(session, monkeypatch):
    """A value a ``[workers] state_store_backend`` offloaded is a reference in the table; the tab
    reads it as the workers do (issue 28, point 7)."""
    from airflow.sdk.execution_time import context as sdk_context
    from airflow.sdk.execution_time.context import _wrap_external_ref
    from airflow.state import TaskScope

    from airflow_t9k.ui.records import earlier_tries

    monkeypatch.setenv("AIRFLOW__WORKERS__STATE_STORE_BACKEND", f"{__name__}.OffloadedStore")
    sdk_context._get_worker_state_store_backend.cache_clear()  # it is read once per process
    try:
        attempts = [{"try": n, **job_of(n)} for n in (1, 2)]
        ref = OffloadedStore().serialize_task_state_store_to_ref(value=attempts, key="t9k_jobs", scope=TaskScope("d", "r", "t"))
        add_try(session, "d", "r", "t", 1, "failed")
        add_attempts(session, "d", "r", "t", json.dumps(_wrap_external_ref(ref)))
        got = earlier_tries(session, ("d", "r", "t", -1), 2)
    finally:
        monkeypatch.delenv("AIRFLOW__WORKERS__STATE_STORE_BACKEND")
        sdk_context._get_worker_state_store_backend.cache_clear()
    assert [(e["try"], e["job"]) for e in got] == [(1, job_of(1))]


@pytest.mark.skipif(not attempts_are_rows(), reason="Airflow 3.3 has no regions: its store is keyed by map index")
def test_a_mapped_task_instances_earlier_tries_are_read_under_its_region(session):
    """Airflow 3.4 keeps a mapped task instance in its expansion's region, and its task state
    store under that region and index: the tab reads the tries and the store there, not another
    expansion's (a Clear of the whole task makes a new region with the same map indexes)."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import insert

    from airflow_t9k.ui.records import earlier_tries

    region, other = uuid.uuid4(), uuid.uuid4()
    rows = [(region, 1, "failed", None), (region, 2, "running", True), (other, 1, "upstream_failed", None)]
    for where, n, state, live in rows:
        session.execute(insert(TaskInstance.__table__).values(id=uuid.uuid4(), dag_id="d", run_id="r", task_id="t",
                                                              region_id=where, region_index=2, try_number=n, state=state,
                                                              pool="default_pool", working_set=live))  # fmt: skip
    for where, n in ((region, 1), (other, 9)):
        session.execute(insert(TaskStateStoreModel.__table__).values(dag_run_id=1, dag_id="d", run_id="r", task_id="t",
                                                                     region_id=where, region_index=2, key="t9k_jobs",
                                                                     value=json.dumps([{"try": n, **job_of(n)}])))  # fmt: skip
    got = earlier_tries(session, ("d", "r", "t", 2), 2)
    assert [(e["try"], e["state"], e["job"]) for e in got] == [(1, "failed", job_of(1))]


def test_the_tasks_history_is_its_runs_records_newest_first_and_bounded(session):
    """Issue 48, item 1: the History section reads XCom t9k_history of the task's runs up to the
    one viewed, by logical date, from Airflow's database (the jobs may be long gone)."""
    from datetime import datetime, timedelta, timezone

    from airflow.models.dagrun import DagRun

    from airflow_t9k.ui.records import task_history

    base = datetime(2026, 11, 1, tzinfo=timezone.utc)
    for n in range(5):
        run = f"scheduled__{n}"
        session.add(DagRun(dag_id="hist", run_id=run, logical_date=base + timedelta(days=n), run_after=base + timedelta(days=n),
                           run_type="scheduled"))  # fmt: skip
        session.flush()
        flagged = [{"metric": "acc", "value": 0.8, "best": 0.9, "best_run": "r", "behind": 0.1}] if n == 3 else []
        record = {"phase": "Succeeded", "metrics": {"acc": 0.8 + n / 100, "bad": "x"}, "restarts": n, "wall_seconds": 60.0,
                  "regressions": flagged}  # fmt: skip
        ti = add_ti(session, "hist", run, "train")
        add_xcom(session, ti, "hist", run, "train", -1, json.dumps(record), key="t9k_history")
    add_ti(session, "hist", "scheduled__4", "other", xcom=None)
    got = task_history(session, ("hist", "scheduled__3", "train", -1), 3)  # runs 3, 2, 1: not 4, which came after
    assert [r["run_id"] for r in got] == ["scheduled__3", "scheduled__2", "scheduled__1"]
    assert got[0]["metrics"] == {"acc": pytest.approx(0.83)}  # "bad" is no number: not shown
    assert got[0]["regressions"][0]["metric"] == "acc"
    assert (got[1]["restarts"], got[1]["regressions"]) == (2, [])
