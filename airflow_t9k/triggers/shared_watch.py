"""Watches shared by every trigger in one triggerer process.

A thousand deferred jobs of one kind in one namespace cost one LIST and one open WATCH,
not a thousand polls: triggers subscribe to the names they care about and are woken when
those objects change. The watch stops when its last subscriber leaves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from typing import Any

from airflow_t9k.k8s.informer import Informer
from airflow_t9k.hooks.t9k import AsyncT9kHook

Obj = dict[str, Any]
log = logging.getLogger(__name__)


class SharedWatch:
    def __init__(self, hook: AsyncT9kHook, path: str, kind: str) -> None:
        self.hook = hook
        self.path = path
        self.kind = kind
        self.subscribers: dict[str, set[asyncio.Event]] = {}
        # (predicate, queue): each receives only the objects it asked for, as they arrive.
        self.matchers: list[tuple[Callable[[Obj], bool], asyncio.Queue[Obj]]] = []
        self.refs = 0
        self.informer: Informer | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        kube = await self.hook.kube()
        self.informer = Informer(kube, self.path, kind=self.kind, handler=self._on_event)
        self.task = asyncio.create_task(self.informer.run(), name=f"t9k-watch-{self.kind}-{self.path}")

    def _on_event(self, event: str, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name")
        for waiter in self.subscribers.get(name, ()):
            waiter.set()
        if event != "DELETED":
            for match, queue in self.matchers:
                if match(obj):
                    queue.put_nowait(obj)

    def subscribe(self, name: str) -> asyncio.Event:
        """An Event set whenever the object called ``name`` changes."""
        waiter = asyncio.Event()
        self.subscribers.setdefault(name, set()).add(waiter)
        return waiter

    def unsubscribe(self, name: str, waiter: asyncio.Event) -> None:
        waiters = self.subscribers.get(name, set())
        waiters.discard(waiter)
        if not waiters:
            self.subscribers.pop(name, None)

    def subscribe_matching(self, match: Callable[[Obj], bool]) -> asyncio.Queue[Obj]:
        """A queue of every object added or changed from now on for which ``match`` is true."""
        queue: asyncio.Queue[Obj] = asyncio.Queue()
        self.matchers.append((match, queue))
        return queue

    def unsubscribe_matching(self, queue: asyncio.Queue[Obj]) -> None:
        self.matchers = [(m, q) for m, q in self.matchers if q is not queue]

    async def synced(self) -> None:
        assert self.informer is not None
        await self.informer.synced.wait()

    def get(self, namespace: str, name: str) -> Obj | None:
        assert self.informer is not None
        return self.informer.get((namespace, name))

    def objects(self) -> list[Obj]:
        assert self.informer is not None
        return list(self.informer.cache.values())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.hook.close()


_WATCHES: dict[Hashable, SharedWatch] = {}
_LOCK: dict[int, asyncio.Lock] = {}


async def acquire(key: Hashable, make_hook: Any, path: str, kind: str) -> SharedWatch:
    loop_key = (id(asyncio.get_running_loop()), key, path)
    lock = _LOCK.setdefault(id(asyncio.get_running_loop()), asyncio.Lock())
    async with lock:
        watch = _WATCHES.get(loop_key)
        if watch is None:
            watch = SharedWatch(make_hook(), path, kind)
            await watch.start()
            _WATCHES[loop_key] = watch
        watch.refs += 1
        return watch


async def release(watch: SharedWatch) -> None:
    lock = _LOCK.setdefault(id(asyncio.get_running_loop()), asyncio.Lock())
    async with lock:
        watch.refs -= 1
        if watch.refs > 0:
            return
        for k, v in list(_WATCHES.items()):
            if v is watch:
                del _WATCHES[k]
    await watch.stop()


def active_watches() -> int:
    return len(_WATCHES)
