"""Which job a task submitted, from Airflow's own records (its metadata database).

A job's ``airflow-t9k.io/*`` annotations are written by whoever creates the job, so anyone who
may create a job could claim any task with them. What a task submitted is what it recorded in
XCom ``t9k_job`` (operators/job.py: kind, namespace, name, uid) when it submitted it. That is
not proof either: the task's own code runs on the worker and can push XCom, and users allowed to
edit XComs or the task state store through the REST API can write both: what they name is a
claim to check against the job before the UI acts on it (docs/ui.md). The UI uses annotations
only to narrow its LISTs.

Functions take a SQLAlchemy session so that the api-server passes its own and tests a real
database of their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from sqlalchemy import select

from airflow_t9k import compat
from airflow_t9k.api import history
from airflow_t9k.api.attempts import ATTEMPTS_KEY, parse
from airflow_t9k.api.identity import FIELDS as IDENTITY_FIELDS
from airflow_t9k.api.identity import checked
from airflow_t9k.links import XCOM_IDENTITY

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

Obj = dict[str, Any]
TaskKey = tuple[str, str, str, int]  # (dag_id, run_id, task_id, map_index)
MAX_TRIES = 10  # earlier tries shown in the tab, the latest


@dataclass(frozen=True)
class TaskRecord:
    """``identity``: the job the task recorded (None when it has submitted none yet);
    ``try_number``: the task instance's current try; ``team``: its DAG's team."""

    identity: Obj | None
    try_number: int = 0
    team: str | None = None  # the DAG's Airflow team, read only when [t9k] team_namespaces is set


def _identity(value: Any) -> Obj | None:
    """The recorded identity when it is well formed (api/identity.py: a kind we know, a DNS
    namespace and name, a uid), None otherwise: its fields go into request paths."""
    return checked(value)


def _decoded(row: Any) -> Any:
    return XComModel.deserialize_value(row)


def task_record(session: Session, key: TaskKey) -> TaskRecord | None:
    """None when no such task instance exists (the caller answers 404)."""
    dag_id, run_id, task_id, map_index = key
    ti = TaskInstance
    found = session.execute(
        select(ti.task_id, ti.try_number)
        .where(ti.dag_id == dag_id, ti.run_id == run_id, ti.task_id == task_id, ti.map_index == map_index)
        .limit(1)
    ).first()
    if found is None:
        return None
    x = XComModel
    row = session.execute(
        select(x.value)
        .where(x.key == XCOM_IDENTITY, x.dag_id == dag_id, x.run_id == run_id, x.task_id == task_id, x.map_index == map_index)
        .limit(1)
    ).first()
    return TaskRecord(identity=_identity(_decoded(row)) if row is not None else None, try_number=int(found.try_number or 0))


def team_of(session: Session, dag_id: str) -> str | None:
    """The Airflow team owning the DAG (its bundle's team with ``[core] multi_team``), None when none."""
    from airflow.models.dag import DagModel

    return DagModel.get_team_name(dag_id, session=session)


def teams_of(session: Session, dag_ids: set[str]) -> dict[str, str | None]:
    """The team of each DAG, in one query (DAGs of no team are left out)."""
    from airflow.models.dag import DagModel

    return DagModel.get_dag_id_to_team_name_mapping(sorted(dag_ids), session=session) if dag_ids else {}


# How the task state store marks a value a [workers] state_store_backend keeps elsewhere: the
# stored format (what the table holds), not a Python name of Airflow's.
EXTERNAL_REF = "__airflow_state_ref__"


def _stored_attempts(session: Session, key: TaskKey) -> Any:
    """The task's ``t9k_jobs`` as the task wrote it, read through Airflow's public state-store API
    (``airflow.state.get_state_backend``, the configured ``[state_store] backend``), and, for a
    value a ``[workers] state_store_backend`` kept elsewhere (the table then holds a reference),
    through that backend's own ``deserialize_task_state_store_from_ref``. None when there is none,
    or it cannot be read."""
    from airflow.configuration import conf
    from airflow.state import get_state_backend

    try:
        raw = get_state_backend().get(compat.state_scope(session, key), ATTEMPTS_KEY, session=session)
        value = json.loads(raw) if raw else None
        ref = value.get(EXTERNAL_REF) if isinstance(value, dict) else None
        if ref:
            backend_class = conf.getimport("workers", "state_store_backend", fallback=None)
            return backend_class().deserialize_task_state_store_from_ref(ref) if backend_class is not None else None
        return value
    except Exception:  # noqa: BLE001 - no earlier attempts shown beats a tab that fails
        return None


def earlier_tries(session: Session, key: TaskKey, current_try: int) -> list[Obj]:
    """The task instance's tries before ``current_try``, newest first: each with Airflow's state
    for it (Airflow's rows of earlier tries, compat.earlier_tries) and the job it ran, from the
    task's own history in the task state store (api/attempts.py; None where that try submitted
    or recorded none)."""
    states = {int(r.try_number): r for r in compat.earlier_tries(session, key)}
    jobs = {e["try"]: e for e in parse(_stored_attempts(session, key))}
    out = []
    for n in sorted((set(states) | set(jobs)) - {current_try}, reverse=True):
        if n > current_try:
            continue
        h = states.get(n)
        job = jobs.get(n)
        out.append({"try": n, "state": str(h.state) if h is not None and h.state else None,
                    "started": h.start_date.isoformat() if h is not None and h.start_date else None,
                    "ended": h.end_date.isoformat() if h is not None and h.end_date else None,
                    "job": {k: job[k] for k in IDENTITY_FIELDS} if job else None})  # fmt: skip
    return out[:MAX_TRIES]


def task_history(session: Session, key: TaskKey, limit: int) -> list[Obj]:
    """The task's records across DAG runs (XCom ``t9k_history``, api/history.py), newest first: of
    this run and the ``limit - 1`` runs before it that pushed one (Airflow's own XCom query, by
    logical date then push time, as a task's ``include_prior_dates`` pull reads them)."""
    dag_id, run_id, task_id, map_index = key
    query = XComModel.get_many(run_id=run_id, key=history.HISTORY_KEY, task_ids=task_id, dag_ids=dag_id,
                               map_indexes=map_index, include_prior_dates=True, limit=limit)  # fmt: skip
    out = []
    rows: list[Any] = list(session.scalars(query))  # XComModel rows (get_many selects the model)
    for row in rows:
        shown = history.for_display(_decoded(row))
        if shown is not None:
            stamp = getattr(row, "timestamp", None)
            out.append({"run_id": str(row.run_id), "time": stamp.isoformat() if stamp is not None else None, **shown})
    return out


def recorded_uids(session: Session, keys: set[TaskKey]) -> dict[TaskKey, str]:
    """The uid each of ``keys`` recorded, in one query (rows of other tasks of the same DAGs and
    runs are read and dropped here: cheaper than a tuple IN most databases plan badly)."""
    if not keys:
        return {}
    x = XComModel
    rows = session.execute(
        select(x.dag_id, x.run_id, x.task_id, x.map_index, x.value).where(
            x.key == XCOM_IDENTITY, x.dag_id.in_({k[0] for k in keys}), x.run_id.in_({k[1] for k in keys})
        )
    ).all()
    out: dict[TaskKey, str] = {}
    for row in rows:
        key = (row.dag_id, row.run_id, row.task_id, int(row.map_index))
        identity = _identity(_decoded(row)) if key in keys else None
        if identity is not None:
            out[key] = identity["uid"]
    return out


def audit(session: Session, *, user: str, action: str, key: TaskKey, job: Obj, detail: str) -> None:
    """One row in Airflow's audit log (the Log table the UI's "Audit Log" shows): who did what
    to which job, under the task the job belongs to."""
    from airflow.models.log import Log

    dag_id, run_id, task_id, map_index = key
    meta = job["metadata"]
    extra = {"kind": job.get("kind"), "namespace": meta.get("namespace"), "name": meta.get("name"),
             "uid": meta.get("uid"), "detail": detail}  # fmt: skip
    session.add(Log(event=f"t9k.{action}", owner=user, dag_id=dag_id, run_id=run_id, task_id=task_id,
                    map_index=map_index, extra=json.dumps(extra)))  # fmt: skip
