"""What an operator reads from and writes to a running task, for tests that call execute()."""

from __future__ import annotations

from typing import Any


class FakeTI:
    def __init__(self, run_id: str = "manual__1", try_number: int = 1, max_tries: int | None = None) -> None:
        self.dag_id, self.run_id, self.task_id, self.map_index, self.try_number = "dag", run_id, "train", -1, try_number
        # Airflow's own: retries + 1 tries in a series, ``max_tries = try_number + retries`` after a Clear;
        # None leaves it out, as for a task instance that does not say.
        if max_tries is not None:
            self.max_tries = max_tries
        self.xcom: dict[str, Any] = {}
        self.pushed: list[tuple[str, Any]] = []  # every push, in order (an XCom written more than once)
        self.start_date = None

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value
        self.pushed.append((key, value))


class Store(dict):
    """The task state store: a retry of the same task sees what an earlier try set."""

    def set(self, key: str, value: Any, **_: Any) -> None:
        self[key] = value

    def delete(self, key: str) -> None:
        self.pop(key, None)


def context(store: Store | None = None, **ti: Any) -> dict[str, Any]:
    return {"ti": FakeTI(**ti), "task_state_store": store if store is not None else Store()}
