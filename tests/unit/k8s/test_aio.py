"""within(): a timeout that never loses a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from airflow_t9k.k8s.aio import within


@pytest.mark.asyncio
async def test_returns_the_result_and_raises_its_error():
    async def value():
        return 7

    async def boom():
        raise ValueError("x")

    assert await within(value(), 1) == 7
    with pytest.raises(ValueError, match="^x$"):
        await within(boom(), 1)


@pytest.mark.asyncio
async def test_times_out_and_cancels_what_it_waited_for():
    cancelled = asyncio.Event()

    async def forever():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(asyncio.TimeoutError):
        await within(forever(), 0.05)
    assert cancelled.is_set()


@pytest.mark.asyncio
@pytest.mark.parametrize("round_", range(50))
async def test_a_cancellation_arriving_as_the_inner_finishes_is_never_lost(round_):
    """The race that asyncio.wait_for loses before 3.12: the waiter is cancelled in the same
    loop iteration in which what it awaits completes."""
    inner_done = asyncio.Event()

    async def quick():
        await asyncio.sleep(0)
        inner_done.set()
        return 1

    async def loop_forever():
        while True:
            await within(quick(), 1)

    task = asyncio.create_task(loop_forever())
    await inner_done.wait()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert done, "the cancellation was lost: the task runs on"
    assert task.cancelled()


@pytest.mark.asyncio
async def test_a_cancelled_waiter_lets_the_inner_task_unwind_before_it_returns():
    """So that the caller may close an async generator whose __anext__ the inner task drove."""

    async def gen():
        while True:
            yield await asyncio.sleep(3600)

    stream = gen()

    async def consume():
        try:
            await within(stream.__anext__(), 60)
        finally:
            await stream.aclose()  # raises "already running" if the inner task still runs

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.01)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert done
    assert task.cancelled()
