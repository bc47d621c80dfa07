"""Status stays writable whatever the input: messages are cut, the cut is said."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from airflow_t9k.controller.queue import WorkQueue
from airflow_t9k.controller.reconcile.status import MESSAGE_LIMIT, StatusBuilder, bounded

NOW = datetime(2026, 11, 26, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("length", "limit"),
    [(0, 10), (10, 10), (11, 10), (600_000, MESSAGE_LIMIT), (5000, 100)],
)
def test_bounded_cuts_to_the_limit_and_says_how_much(length, limit):
    text = "x" * length
    out = bounded(text, limit)
    assert len(out) <= limit
    if length <= limit:
        assert out == text
    elif limit > 40:
        assert out.endswith(f"(cut; {length} characters in all)")
    else:
        assert out == text[:limit]


def test_condition_messages_are_bounded():
    sb = StatusBuilder({}, NOW)
    sb.set_condition("Failed", True, "InvalidSpec", "A=" + "v" * 600_000)
    message = sb.condition("Failed")["message"]
    assert len(message) <= MESSAGE_LIMIT
    assert message.startswith("A=vvv")


def test_queue_counts_failures_until_forgotten():
    import asyncio

    async def go() -> None:
        q = WorkQueue()
        assert q.failures("k") == 0
        q.add_rate_limited("k")
        q.add_rate_limited("k")
        assert q.failures("k") == 2
        q.forget("k")
        assert q.failures("k") == 0

    asyncio.run(go())
