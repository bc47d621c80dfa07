"""What differs between the Airflow versions this package supports (3.3 and 3.4), in one place.

Features are detected, not version numbers compared, so a backport or a later release that keeps
a feature needs nothing here. Airflow is imported inside the functions: a worker imports this
module with the task SDK only, and the api-server's models are loaded where the UI asks for them.

Airflow 3.4 changed three things this package reads (docs/airflow.md, "Supported Airflow versions"):

- Task Loops (AIP-111): a task inside a loop runs once per iteration, each iteration a task
  instance of its own with the same dag, run, task and map index; the iteration is
  ``context["loop"].index`` (``loop_iteration``). 3.3 has no loops.
- Every try of a task instance is a row of ``task_instance`` (the earlier ones archived:
  ``working_set`` NULL), where 3.3 moves earlier tries to ``task_instance_history``. XCom is
  kept per try (``xcom_v2``), where 3.3 clears it when a try starts; Airflow's ORM queries see
  the current tries only, its XCom view's included, so reading XCom needs nothing here.
- A mapped or looped task instance lives in a *region* (``region_id``, ``region_index``), and the
  task state store is keyed by it: the UI reads a task's store under the region of its row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

TaskKey = tuple[str, str, str, int]  # (dag_id, run_id, task_id, map_index), as the UI names a task instance


def loop_iteration(context: Any) -> int | None:
    """The Task Loop iteration (0, 1, ...) the task instance of ``context`` runs, None outside a
    loop and on Airflow 3.3 (no ``loop`` in the context)."""
    loop = context.get("loop") if hasattr(context, "get") else None
    index = getattr(loop, "index", None)
    return index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 else None


def attempts_are_rows() -> bool:
    """Whether earlier tries are archived rows of ``task_instance`` and XCom is kept per try
    (Airflow 3.4), rather than rows of ``task_instance_history`` with XCom cleared (3.3)."""
    from airflow.models.taskinstance import TaskInstance

    return hasattr(TaskInstance, "working_set")


def earlier_tries(session: Session, key: TaskKey) -> list[Any]:
    """Airflow's rows of the task instance's earlier tries (``try_number``, ``state``,
    ``start_date``, ``end_date``), in no order."""
    from sqlalchemy import select

    dag_id, run_id, task_id, map_index = key
    if not attempts_are_rows():
        from airflow.models.taskinstancehistory import TaskInstanceHistory as H  # type: ignore[import-not-found,unused-ignore]

        return list(session.execute(select(H.try_number, H.state, H.start_date, H.end_date).where(
            H.dag_id == dag_id, H.run_id == run_id, H.task_id == task_id, H.map_index == map_index)))  # fmt: skip
    from airflow.models.taskinstance import TaskInstance as T

    query = select(T.try_number, T.state, T.start_date, T.end_date).where(
        T.dag_id == dag_id, T.run_id == run_id, T.task_id == task_id, T.region_index == map_index, T.working_set.is_(None)
    )
    region = _live_region(session, key)
    if region is not None:  # a mapped task instance: its own region's tries, not another expansion's
        query = query.where(T.region_id == region)
    return list(session.execute(query.execution_options(include_all_attempts=True)))


def _live_region(session: Session, key: TaskKey) -> Any | None:
    """The region of the task instance's current try (Airflow 3.4), None when there is none."""
    from airflow.models.taskinstance import TaskInstance as T
    from sqlalchemy import select

    dag_id, run_id, task_id, map_index = key
    return session.execute(
        select(T.region_id).where(T.dag_id == dag_id, T.run_id == run_id, T.task_id == task_id, T.region_index == map_index)
    ).scalar()


def state_scope(session: Session, key: TaskKey) -> Any:
    """The task state store's scope of the task instance, as its own try writes it: on Airflow 3.4
    a mapped task instance's values are under its region (the store matches region and index
    exactly), on 3.3 under dag, run, task and map index."""
    from airflow.state import TaskScope

    dag_id, run_id, task_id, map_index = key
    if attempts_are_rows():
        region = _live_region(session, key)
        if region is not None:
            regional: Any = TaskScope  # 3.4's takes the region after the index; 3.3's has none
            return regional(dag_id, run_id, task_id, map_index, region)
    return TaskScope(dag_id, run_id, task_id, map_index)
