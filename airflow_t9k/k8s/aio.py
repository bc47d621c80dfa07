"""asyncio helpers the client, the informer, the elector and the trigger share."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(aw: Awaitable[T], timeout: float | None) -> T:
    """``asyncio.wait_for`` without its flaw before Python 3.12: there, a cancellation that
    arrives just as the awaited thing finishes is lost, and a task told to stop runs on
    (a controller that never exits, a test that never ends). Raises ``TimeoutError``."""
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait({task})  # let it unwind first: a generator it drives can then be closed
        raise
    if not done:
        task.cancel()
        await asyncio.wait({task})  # let it unwind; its CancelledError stays inside it
        raise asyncio.TimeoutError
    return task.result()
