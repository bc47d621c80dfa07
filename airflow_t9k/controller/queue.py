"""A work queue with client-go's guarantees, on asyncio.

A key is queued at most once however often it is added; a key being reconciled is not
handed to a second worker, and if it was added meanwhile it is queued again when the
first worker is done. Delayed adds serve timers and error back-off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable


class WorkQueue:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}

    def add(self, key: Hashable) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    def add_rate_limited(self, key: Hashable) -> float:
        """Requeue after a failure, backing off per key: 0.5 s, 1 s, 2 s ... up to 60 s."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = min(0.5 * 2**n, 60.0)
        self.add_after(key, delay)
        return delay

    def failures(self, key: Hashable) -> int:
        """Failed passes in a row since the key last went through."""
        return self._failures.get(key, 0)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    async def get(self) -> Hashable:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def __len__(self) -> int:
        return self._queue.qsize()
