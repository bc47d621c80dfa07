"""The one read of an earlier run's XCom (operators/earlier.py): skipped inside a Task Loop, where
Airflow 3.4 refuses prior-date lookups, and never the task's failure."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_t9k.operators.earlier import earlier_xcom
from tests.support.task import FakeTI


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(("info", msg % args))

    def warning(self, msg: str, *args: Any) -> None:
        self.lines.append(("warning", msg % args))


class Pulling(FakeTI):
    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer, self.pulls = answer, 0

    def xcom_pull(self, **kw: Any) -> Any:
        self.pulls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_it_reads_the_latest_earlier_runs_value() -> None:
    ti = Pulling({"uid": "u"})
    assert earlier_xcom({"ti": ti}, "t9k_job", "overlap='wait'", Log()) == {"uid": "u"}


def test_inside_a_task_loop_it_does_not_ask() -> None:
    ti, log = Pulling({"uid": "u"}), Log()
    assert earlier_xcom({"ti": ti, "loop": SimpleNamespace(index=2)}, "t9k_job", "cache=True", log) is None
    assert ti.pulls == 0
    said = "cache=True does not apply inside a Task Loop: Airflow refuses lookups of earlier runs' XComs there"
    assert log.lines == [("info", said)]


@pytest.mark.parametrize("error", [RuntimeError("API_SERVER_ERROR: 400"), ConnectionError("reset")])
def test_a_refused_read_is_a_warning(error: Exception) -> None:
    log = Log()
    assert earlier_xcom({"ti": Pulling(error)}, "t9k_history", "the comparison with earlier runs", log) is None
    assert log.lines[0][0] == "warning"
    assert "could not read earlier runs' XCom 't9k_history'" in log.lines[0][1]
