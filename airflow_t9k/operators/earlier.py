"""What an earlier DAG run of this task pushed: the one read ``overlap=``, ``cache=`` and the task's
history share (Airflow's ``include_prior_dates`` pull of the same task and map index)."""

from __future__ import annotations

from typing import Any

from airflow_t9k.compat import loop_iteration


def earlier_xcom(context: Any, key: str, what: str, log: Any) -> Any:
    """The latest earlier run's XCom ``key`` of this task and map index; None when there is none,
    inside a Task Loop (Airflow 3.4 refuses prior-date lookups there: ``what`` is then left out,
    said in the log), or when the read fails (said as a warning: the task goes on without it)."""
    if loop_iteration(context) is not None:
        log.info("%s does not apply inside a Task Loop: Airflow refuses lookups of earlier runs' XComs there", what)
        return None
    ti = context["ti"]
    pull = getattr(ti, "xcom_pull", None)
    if pull is None:
        return None
    map_index = getattr(ti, "map_index", -1)
    try:
        return pull(task_ids=ti.task_id, key=key, include_prior_dates=True, map_indexes=-1 if map_index is None else map_index)
    except Exception as exc:  # noqa: BLE001 - the API server's refusal (AirflowRuntimeError) or a lost connection
        log.warning("%s: could not read earlier runs' XCom %r (%s); going on without it", what, key, exc)
        return None
