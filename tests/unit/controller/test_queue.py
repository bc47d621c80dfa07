"""The work queue: dedupe, one worker per key, requeue of keys added while in flight."""

from __future__ import annotations

import asyncio

import pytest

from airflow_t9k.controller.queue import WorkQueue


@pytest.mark.asyncio
async def test_a_key_added_twice_is_queued_once():
    q = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]


@pytest.mark.asyncio
async def test_a_key_in_flight_is_not_handed_out_again_until_done():
    q = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # changed while being reconciled
    assert len(q) == 0
    q.done(key)
    assert len(q) == 1 and await q.get() == "a"


@pytest.mark.asyncio
async def test_rate_limited_requeue_backs_off_and_forget_resets():
    q = WorkQueue()
    delays = [q.add_rate_limited("a") for _ in range(9)]
    assert delays[:4] == [0.5, 1.0, 2.0, 4.0] and delays[-1] == 60.0
    q.forget("a")
    assert q.add_rate_limited("a") == 0.5


@pytest.mark.asyncio
async def test_add_after_adds_later():
    q = WorkQueue()
    q.add_after("a", 0.05)
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 1) == "a"
