"""Rows of Airflow's metadata database as a task leaves them, in the shape of the Airflow that runs
the tests (airflow_t9k/compat.py): 3.3 keeps a task instance's earlier tries in
``task_instance_history`` and its XCom by dag, run, task and map index; 3.4 keeps every try as a
row of ``task_instance`` (earlier ones archived) with its XCom by the try's row id."""

from __future__ import annotations

import json
import uuid
import zlib
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select

from airflow_t9k.compat import attempts_are_rows

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def _run_id_of(s: Session, dag: str, run: str) -> int:
    """The dag_run row's id: the run's own where a test made one (XComModel.get_many joins it), else
    one made here on 3.4 (its XCom view joins the run), a stand-in on 3.3 (its XCom only names it)."""
    from airflow.models.dagrun import DagRun

    found = s.execute(select(DagRun.id).where(DagRun.dag_id == dag, DagRun.run_id == run)).scalar()
    if found is not None:
        return int(found)
    if not attempts_are_rows():
        return zlib.crc32(f"{dag}/{run}".encode())
    from airflow._shared.timezones import timezone

    s.execute(insert(DagRun.__table__).values(dag_id=dag, run_id=run, run_type="manual", run_after=timezone.utcnow(),
                                              state="running"))  # fmt: skip
    return int(s.execute(select(DagRun.id).where(DagRun.dag_id == dag, DagRun.run_id == run)).scalar_one())


def add_ti(s: Session, dag: str, run: str, task: str, map_index: int = -1, xcom: Any = None, raw: bool = False,
           try_number: int = 0) -> uuid.UUID:  # fmt: skip
    """A task instance's current try, with XCom ``t9k_job`` when ``xcom`` is given (the Task
    Execution API stores values already as JSON, ``serialize_value`` as a JSON string: ``raw``)."""
    from airflow.models.taskinstance import TaskInstance

    ti_id = uuid.uuid4()
    index = {"region_index": map_index} if attempts_are_rows() else {"map_index": map_index}
    s.execute(insert(TaskInstance.__table__).values(id=ti_id, dag_id=dag, run_id=run, task_id=task, pool="default_pool",
                                                    try_number=try_number, **index))  # fmt: skip
    if xcom is not None:
        add_xcom(s, ti_id, dag, run, task, map_index, xcom if raw else json.dumps(xcom))
    return ti_id


def add_xcom(
    s: Session, ti_id: uuid.UUID, dag: str, run: str, task: str, map_index: int, value: Any, key: str = "t9k_job"
) -> None:
    run_row = _run_id_of(s, dag, run)
    if attempts_are_rows():
        from airflow.models.xcom import XComModelV2

        s.execute(insert(XComModelV2.__table__).values(task_instance_id=ti_id, key=key, value=value))
        return
    from airflow.models.xcom import XComModel

    s.execute(insert(XComModel.__table__).values(dag_run_id=run_row, dag_id=dag, run_id=run, task_id=task, map_index=map_index,
                                                 key=key, value=value))  # fmt: skip


def add_try(s: Session, dag: str, run: str, task: str, n: int, state: str, map_index: int = -1, xcom: Any = None) -> None:
    """An earlier try ``n`` of the task instance, ended in ``state`` (with its own XCom ``t9k_job``
    on 3.4, where a try keeps it)."""
    if attempts_are_rows():
        from airflow.models.taskinstance import TaskInstance

        ti_id = uuid.uuid4()
        s.execute(insert(TaskInstance.__table__).values(id=ti_id, dag_id=dag, run_id=run, task_id=task, region_index=map_index,
                                                        try_number=n, state=state, pool="default_pool",
                                                        working_set=None))  # fmt: skip
        if xcom is not None:
            add_xcom(s, ti_id, dag, run, task, map_index, json.dumps(xcom))
        return
    from airflow.models.taskinstancehistory import TaskInstanceHistory

    s.execute(insert(TaskInstanceHistory.__table__).values(task_instance_id=uuid.uuid4(), dag_id=dag, run_id=run, task_id=task,
                                                           map_index=map_index, try_number=n, state=state,
                                                           pool="default_pool"))  # fmt: skip


def add_attempts(s: Session, dag: str, run: str, task: str, value: str, key: str = "t9k_jobs") -> None:
    """The task state store's ``key`` of an unmapped task instance (JSON text)."""
    from airflow.models.task_state_store import TaskStateStoreModel

    index = {"region_index": -1} if attempts_are_rows() else {"map_index": -1}
    s.execute(insert(TaskStateStoreModel.__table__).values(dag_run_id=1, dag_id=dag, run_id=run, task_id=task, key=key,
                                                           value=value, **index))  # fmt: skip
