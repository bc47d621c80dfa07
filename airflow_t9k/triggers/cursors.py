"""Where the followed logs stand, kept in the task's XCom ``t9k_log_cursor`` while it is deferred,
so that a triggerer restart resumes each replica's log from where it was, not from the deferral
(a long training would otherwise print up to ``max_log_lines`` lines again).

A trigger's stored kwargs cannot change after the deferral; XCom can, from the triggerer (Airflow
3.3 serves ``XCom.aset``/``aget_value`` to triggers), and Airflow keeps a task's XComs when it
resumes from a deferral (it clears them when a new try starts). The cursor is written at most
every ``SAVE_EVERY`` seconds while it moves and once more when the trigger ends, so a restart that
kills the triggerer repeats at most that many seconds of lines. A trigger run without a task
instance (``airflow dags test``'s in-process runner, tests) keeps it in memory only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_t9k.api.logcursor import Cursor

KEY = "t9k_log_cursor"
SAVE_EVERY = 5.0
# The read goes through the triggerer's supervisor to the API server, which answered 10 s late while
# a restarted triggerer took its triggers over on a loaded machine. Only the log waits for it, never
# the job's outcome, so the bound is generous: giving up repeats the lines since the deferral.
LOAD_WITHIN = 30.0


def _ti_key(trigger: Any) -> Any | None:
    if not getattr(getattr(trigger, "forwarding", None), "save_log_cursor", True):
        return None  # do_xcom_push=False: the task pushes no XCom, and its trigger neither
    ti = getattr(trigger, "task_instance", None)
    return ti if ti is not None and all(getattr(ti, k, None) is not None for k in ("dag_id", "task_id", "run_id")) else None


async def load(trigger: Any) -> dict[str, Cursor]:
    """The cursors an earlier run of this trigger saved (empty when none, or without a task)."""
    ti = _ti_key(trigger)
    if ti is None:
        return {}
    try:
        from airflow.sdk.bases.xcom import BaseXCom

        saved = await asyncio.wait_for(BaseXCom.aget_value(ti_key=ti, key=KEY), LOAD_WITHIN)
    except Exception as exc:  # noqa: BLE001 - resuming from the deferral instead is the old behaviour, not a failure
        if isinstance(exc, asyncio.TimeoutError):
            trigger.log.info("no answer within %gs reading where the replicas' logs stood (%s): lines since the "
                             "deferral may repeat", LOAD_WITHIN, KEY)  # fmt: skip
        else:
            trigger.log.debug("could not read %s: %s", KEY, exc)
        return {}
    if not isinstance(saved, dict):
        return {}
    out = {str(pod): Cursor.from_dict(value) for pod, value in saved.items()}
    if out:
        trigger.log.info("resuming the replicas' logs where an earlier triggerer left them (%s)", ", ".join(sorted(out)))
    return {pod: c for pod, c in out.items() if c.at is not None}


async def save(trigger: Any, cursors: dict[str, Cursor]) -> bool:
    """Write the cursors; False when there is no task to write them to or writing failed."""
    return await put(trigger, KEY, {pod: c.as_dict() for pod, c in cursors.items() if c.at is not None})


async def put(trigger: Any, key: str, value: Any) -> bool:
    """Write one XCom of the deferred task from the triggerer (also ``forwarding.running_xcom``, such
    as TIJobOperator's ``ti_state``); False when there is no task to write to or writing failed."""
    ti = _ti_key(trigger)
    if ti is None:
        return False
    try:
        from airflow.sdk.bases.xcom import BaseXCom

        index = ti.map_index if getattr(ti, "map_index", None) is not None else -1
        await asyncio.wait_for(
            BaseXCom.aset(key, value, dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, map_index=index), 10
        )
        return True
    except Exception as exc:  # noqa: BLE001 - the wait goes on; what is written is best-effort
        trigger.log.debug("could not write %s: %s", key, exc)
        return False


async def keep_saved(trigger: Any, cursors: dict[str, Cursor]) -> None:
    """Save the cursors every ``SAVE_EVERY`` seconds while they move (cancelled with the followers)."""
    if _ti_key(trigger) is None:
        return
    last: dict[str, dict[str, Any]] = {}
    try:
        while True:
            await asyncio.sleep(SAVE_EVERY)
            now = {pod: c.as_dict() for pod, c in cursors.items()}
            if now != last and await save(trigger, cursors):
                last = now
    finally:
        now = {pod: c.as_dict() for pod, c in cursors.items()}
        if now != last:
            await asyncio.shield(save(trigger, cursors))
