"""A work queue with client-go's guarantees, on asyncio, and two lanes.

A key is queued at most once however often it is added; a key being reconciled is not
handed to a second worker, and if it was added meanwhile it is queued again when the
first worker is done. Delayed adds serve timers and error back-off.

Lanes: work on jobs that already run (a pod ended, a timer fired, a spec changed) goes
before starting new jobs. Under a burst of submissions a FIFO queue makes a pod's end wait
behind every job still to be created (measured: p99 73 s from a pod's end to its job's
status at 1,000 jobs, docs/benchmarks.md). New jobs are not starved either: while both
lanes hold work, every FAST_SHARE+1-th key comes from the slow lane. A key added urgently
while it waits in the slow lane moves to the fast one. A plan's timer (``wake``) is one per key.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable

FAST_SHARE = 3  # fast-lane keys handed out in a row while new jobs wait


class WorkQueue:
    def __init__(self) -> None:
        # One token per live entry: get() waits for a token, then takes the first live entry,
        # fast lane first. Entries left behind by a move between lanes are skipped.
        self._tokens: asyncio.Queue[None] = asyncio.Queue()
        self._fast: deque[Hashable] = deque()
        self._slow: deque[Hashable] = deque()
        self._lane: dict[Hashable, bool] = {}  # queued key -> in the fast lane
        self._dirty: dict[Hashable, bool] = {}  # added since last handed out -> urgently
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
        self._fast_streak = 0
        self._wakes: dict[Hashable, tuple[float, asyncio.TimerHandle]] = {}  # key -> its one plan timer (``wake``)

    def add(self, key: Hashable, urgent: bool = True) -> None:
        """Queue ``key``; ``urgent=False`` for work that may wait behind the rest (a new job)."""
        if key in self._dirty:
            urgent = urgent or self._dirty[key]
            self._dirty[key] = urgent
            if urgent and self._lane.get(key) is False:
                self._lane[key] = True  # the slow entry is dead from now on
                self._fast.append(key)
            return
        self._dirty[key] = urgent
        if key not in self._processing:
            self._push(key, urgent)

    def _push(self, key: Hashable, urgent: bool) -> None:
        self._lane[key] = urgent
        (self._fast if urgent else self._slow).append(key)
        self._tokens.put_nowait(None)

    def add_after(self, key: Hashable, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    def wake(self, key: Hashable, delay: float) -> None:
        """Plan ``key`` again within ``delay`` seconds (a plan's ``requeue_after``), with one timer per
        key: the earliest. The pass it wakes asks for its next wake itself, so a later timer adds
        nothing while an earlier one is pending: a job whose reports keep moving its stall deadline
        holds one timer, not one per pass (reconcile/stall.py)."""
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        pending = self._wakes.get(key)
        if pending is not None and pending[0] <= due:
            return
        if pending is not None:
            pending[1].cancel()  # the earlier pass asks for the later time again
        self._wakes[key] = (due, loop.call_later(delay, self._woken, key))

    def _woken(self, key: Hashable) -> None:
        self._wakes.pop(key, None)
        self.add(key)

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
        await self._tokens.get()
        key = self._take()
        del self._dirty[key]
        self._processing.add(key)
        return key

    def _take(self) -> Hashable:
        self._drop_dead(self._fast, True)
        self._drop_dead(self._slow, False)
        if self._fast and (not self._slow or self._fast_streak < FAST_SHARE):
            self._fast_streak += 1
            lane = self._fast
        else:
            self._fast_streak = 0
            lane = self._slow
        key = lane.popleft()  # a token always has a live entry behind it
        del self._lane[key]
        return key

    def _drop_dead(self, lane: deque[Hashable], fast: bool) -> None:
        while lane and self._lane.get(lane[0]) is not fast:
            lane.popleft()

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._push(key, self._dirty[key])

    def __len__(self) -> int:
        return self._tokens.qsize()
