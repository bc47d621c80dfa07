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
    assert len(q) == 1
    assert await q.get() == "a"


@pytest.mark.asyncio
async def test_rate_limited_requeue_backs_off_and_forget_resets():
    q = WorkQueue()
    delays = [q.add_rate_limited("a") for _ in range(9)]
    assert delays[:4] == [0.5, 1.0, 2.0, 4.0]
    assert delays[-1] == 60.0
    q.forget("a")
    assert q.add_rate_limited("a") == 0.5


@pytest.mark.asyncio
async def test_add_after_adds_later():
    q = WorkQueue()
    q.add_after("a", 0.05)
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 1) == "a"


@pytest.mark.asyncio
async def test_wake_keeps_one_timer_per_key_the_earliest():
    q = WorkQueue()
    q.wake("a", 0.05)
    q.wake("a", 5.0)  # later: the pass at 0.05 s asks for it again
    q.wake("b", 5.0)
    q.wake("b", 0.05)  # earlier: replaces the later one
    assert len(q._wakes) == 2
    got = {await asyncio.wait_for(q.get(), 1), await asyncio.wait_for(q.get(), 1)}
    assert got == {"a", "b"}
    assert q._wakes == {}  # nothing left pending: no second pass at 5 s
    q.done("a")
    q.done("b")
    q.wake("a", 0.01)  # fired: a new wake is armed
    assert await asyncio.wait_for(q.get(), 1) == "a"


async def drain(q: WorkQueue) -> list:
    out = []
    while len(q):
        key = await q.get()
        out.append(key)
        q.done(key)
    return out


@pytest.mark.asyncio
async def test_new_work_waits_behind_urgent_work_and_each_lane_keeps_its_order():
    q = WorkQueue()
    for key in ("new-1", "new-2"):
        q.add(key, urgent=False)
    q.add("running-1")
    q.add("new-3", urgent=False)
    q.add("running-2")
    assert len(q) == 5
    assert await drain(q) == ["running-1", "running-2", "new-1", "new-2", "new-3"]


@pytest.mark.asyncio
async def test_an_urgent_add_moves_a_waiting_key_to_the_fast_lane_once():
    q = WorkQueue()
    q.add("a", urgent=False)
    q.add("b", urgent=False)
    q.add("c")
    q.add("b")  # b's pod ended while b waited as new work
    q.add("b", urgent=False)  # a later slow add does not move it back
    assert len(q) == 3
    assert await drain(q) == ["c", "b", "a"]
    assert len(q) == 0


@pytest.mark.asyncio
async def test_a_key_added_urgently_while_in_flight_comes_back_in_the_fast_lane():
    q = WorkQueue()
    q.add("a", urgent=False)
    key = await q.get()
    q.add("a")
    q.add("z", urgent=False)
    q.done(key)
    assert await drain(q) == ["a", "z"]


@pytest.mark.asyncio
async def test_waiting_workers_each_get_a_different_key():
    q = WorkQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    q.add("slow", urgent=False)
    q.add("fast")
    got = await asyncio.wait_for(asyncio.gather(getters[0], getters[1]), 1)
    assert sorted(got) == ["fast", "slow"]
    assert not getters[2].done()
    getters[2].cancel()
    q.add("later")  # a cancelled getter does not swallow the key
    assert await asyncio.wait_for(q.get(), 1) == "later"


@pytest.mark.asyncio
async def test_new_jobs_are_not_starved_by_a_stream_of_urgent_work():
    q = WorkQueue()
    for n in range(2):
        q.add(f"new-{n}", urgent=False)
    for n in range(8):
        q.add(f"run-{n}")
    order = await drain(q)
    assert order == ["run-0", "run-1", "run-2", "new-0", "run-3", "run-4", "run-5", "new-1", "run-6", "run-7"]
