"""``--dist loadgroup`` that works with pytest 9.2: tests with the same ``xdist_group`` mark run on
one worker, one after the other; every other test is a unit of its own, given to whichever
worker is free. The largest groups go out first.

pytest-xdist 3.8 tells its scheduler a test's group by appending ``@group`` to the test's node
id; since pytest 9.2 derives node ids from a structured id, that append is lost and every test
is scheduled alone (pytest-dev/pytest-xdist#1386, fix pending in #1388). Here the workers write
the groups they collected to a file the controller process's scheduler reads instead: every
worker collects the same tests (xdist checks), and they send their collection, which the
scheduler waits for, only after writing it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdist.scheduler import LoadScopeScheduling

if TYPE_CHECKING:
    import pytest


def groups_file(run_id: str) -> Path:
    return Path(tempfile.gettempdir()) / f"airflow-t9k-test-groups-{run_id}.json"


def write_groups(items: list[pytest.Item], run_id: str) -> None:
    """In a worker, once collection is done: node id -> group, for the tests that have one."""
    groups = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None:
            groups[item.nodeid] = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    path = groups_file(run_id)
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(groups))
    tmp.replace(path)  # whole, or not at all: the workers write the same content


class GroupScheduling(LoadScopeScheduling):
    def __init__(self, config: pytest.Config, log: Any, run_id: str) -> None:
        super().__init__(config, log)
        self._run_id = run_id
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first called once every worker has sent its collection
            path = groups_file(self._run_id)
            self._groups = json.loads(path.read_text()) if path.exists() else {}
        group = self._groups.get(nodeid)
        return f"@{group}" if group else nodeid
