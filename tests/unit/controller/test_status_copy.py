"""The copy a pass starts from (a status, a pod template): equal to the original, sharing nothing mutable with it."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from airflow_t9k.api.outcome import true_condition
from airflow_t9k.controller.reconcile.status import StatusBuilder
from airflow_t9k.kinds.base import deep

NOW = datetime(2026, 11, 28, tzinfo=timezone.utc)


class Opaque:
    def __init__(self, items: list[int]) -> None:
        self.items = items


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        None,
        "text",
        0,
        1.5,
        True,
        {"conditions": [{"type": "Running", "status": "True"}], "phase": "Running"},
        {"tasks": [{"status": [{"name": "w-0", "containers": [{"state": {"running": {}}}]}]}]},
        [[[{"deep": [1, 2, {"x": None}]}]]],
        {"tuple": (1, [2])},  # not JSON: deep-copied as copy.deepcopy would
    ],
)
def test_deep_copy_equals_and_shares_nothing_mutable(value):
    out = deep(value)
    assert out == value
    seen: list[tuple[object, object]] = [(value, out)]
    while seen:  # every container in the copy is a new object
        a, b = seen.pop()
        if isinstance(a, (dict, list)):
            assert a is not b
            pairs = zip(a.values(), b.values(), strict=True) if isinstance(a, dict) else zip(a, b, strict=True)
            seen.extend(pairs)


def test_deep_copy_deep_copies_other_objects():
    inner = Opaque([1, 2])
    out = deep({"o": inner})
    assert out["o"] is not inner
    assert out["o"].items == [1, 2]
    assert out["o"].items is not inner.items


@pytest.mark.parametrize(
    ("status", "kind", "expected"),
    [
        (None, "NamespaceNotManaged", False),
        ({}, "NamespaceNotManaged", False),
        ({"conditions": None}, "NamespaceNotManaged", False),
        ({"conditions": [{"type": "NamespaceNotManaged", "status": "True"}]}, "NamespaceNotManaged", True),
        ({"conditions": [{"type": "NamespaceNotManaged", "status": "False"}]}, "NamespaceNotManaged", False),
        ({"conditions": [{"type": "Other", "status": "True"}]}, "NamespaceNotManaged", False),
        ({"conditions": ["junk", {"type": "NamespaceNotManaged", "status": "True"}]}, "NamespaceNotManaged", True),
        # the first of a type decides, as StatusBuilder.condition reads it
        ({"conditions": [{"type": "A", "status": "False"}, {"type": "A", "status": "True"}]}, "A", False),
    ],
)
def test_true_condition_reads_as_the_status_builder(status, kind, expected):
    assert (true_condition(status or {}, kind) is not None) is expected
    conditions = (status or {}).get("conditions", [])
    if isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions):  # what the schema admits
        assert StatusBuilder(status, NOW).is_true(kind) is expected


def test_status_builder_leaves_the_job_status_alone():
    status = {"conditions": [{"type": "Running", "status": "True", "reason": "r", "message": "m"}], "phase": "Running"}
    sb = StatusBuilder(status, NOW)
    sb.set_condition("Running", False, "Stopped", "gone")
    sb.new["phase"] = "Failed"
    assert status == {"conditions": [{"type": "Running", "status": "True", "reason": "r", "message": "m"}], "phase": "Running"}
    assert sb.old == status
    assert sb.old is not status
