"""``dry_run()``'s stand-ins: a task instance for the run ``manual__dry-run`` whose XComs are
placeholders printed as ``<xcom:task:key>``."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any


class _Placeholder(str):
    """Stands for an XCom in a dry run: prints as ``<xcom:task:key>``, one shell word, and can be indexed."""

    def __getitem__(self, key: Any) -> _Placeholder:
        return _Placeholder(f"{str(self)[:-1]}.{key}>")

    def __getattr__(self, name: str) -> _Placeholder:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Placeholder(f"{str(self)[:-1]}.{name}>")


class _DryRunTI:
    def __init__(self, op: Any) -> None:
        self.dag_id = op.dag_id if op.has_dag() else "dag"
        self.run_id = "manual__dry-run"
        self.task_id = op.task_id
        self.map_index = -1
        self.try_number = 1

    def xcom_pull(self, task_ids: Any = None, key: str = "return_value", **_: Any) -> _Placeholder:
        return _Placeholder(f"<xcom:{task_ids or self.task_id}:{key}>")

    def xcom_push(self, key: str, value: Any) -> None:
        pass


def dry_run_context(op: Any) -> dict[str, Any]:
    from airflow.sdk.execution_time import macros

    now = datetime.now(timezone.utc).replace(microsecond=0)
    ti = _DryRunTI(op)
    params = op.params.dump() if hasattr(op.params, "dump") else dict(op.params or {})
    return {
        "ti": ti, "task_instance": ti, "task": op, "dag": op.dag if op.has_dag() else None, "params": params,
        "run_id": ti.run_id, "map_index": -1, "try_number": 1, "macros": macros,
        "logical_date": now, "data_interval_start": now, "data_interval_end": now,
        "ds": now.strftime("%Y-%m-%d"), "ds_nodash": now.strftime("%Y%m%d"),
        "ts": now.isoformat(), "ts_nodash": now.strftime("%Y%m%dT%H%M%S"),
    }  # fmt: skip
