"""Watches shared by every trigger in one triggerer process.

A thousand deferred jobs of one kind in one namespace cost one LIST and one open WATCH,
not a thousand polls: triggers subscribe to the names they care about and are woken when
those objects change. The watch stops when its last subscriber leaves.

The informer retries every failure with back-off and never gives up (other triggers may
share it); what failed last is kept here, and every subscriber is woken, so each trigger
can decide by its own deadline, and end at once on an error waiting cannot fix.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from airflow_t9k.k8s.client import UNDECODABLE
from airflow_t9k.k8s.errors import Gone
from airflow_t9k.k8s.informer import Informer

if TYPE_CHECKING:
    from airflow_t9k.hooks.t9k import AsyncT9kHook

Obj = dict[str, Any]
log = logging.getLogger(__name__)


class _ReportingInformer(Informer):
    """An informer that tells its watch about each failed list or watch, and each recovery."""

    def __init__(self, *args: Any, on_failure: Callable[[BaseException | None, bool], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_failure = on_failure

    async def _list(self) -> None:
        try:
            await super()._list()
        except Exception as exc:
            self._on_failure(exc, False)
            raise
        self._on_failure(None, False)

    async def _watch_once(self) -> None:
        try:
            await super()._watch_once()
        except Gone:
            raise
        except Exception as exc:
            self._on_failure(exc, True)
            raise

    def _opened(self) -> None:
        super()._opened()
        self._on_failure(None, True)


class SharedWatch:
    def __init__(self, hook: AsyncT9kHook, path: str, kind: str) -> None:
        self.hook = hook
        self.path = path
        self.kind = kind
        self.subscribers: dict[str, set[asyncio.Event]] = {}
        # queue -> predicate: each receives only the objects it asked for, as they arrive. A dict,
        # not a list: thousands of triggers leave one by one, and each must cost the same.
        self.matchers: dict[asyncio.Queue[Obj], Callable[[Obj], bool]] = {}
        self.refs = 0
        self.informer: Informer | None = None
        self.task: asyncio.Task[None] | None = None
        # The last failure of a list or watch (translated), None once it works again.
        self.failure: BaseException | None = None
        self.failure_in_watch = False

    async def start(self) -> None:
        kube = await self.hook.kube()
        self.informer = _ReportingInformer(kube, self.path, kind=self.kind, handler=self._on_event, on_failure=self._failed)
        self.task = asyncio.create_task(self.informer.run(), name=f"t9k-watch-{self.kind}-{self.path}")

    def _failed(self, exc: BaseException | None, in_watch: bool) -> None:
        if exc is None:
            self.failure = None
            return
        self.failure = self.hook.translate(exc, "GET", self.path, watch=in_watch)
        self.failure_in_watch = in_watch
        for waiters in self.subscribers.values():
            for waiter in waiters:
                waiter.set()

    def _on_event(self, event: str, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        for waiter in self.subscribers.get(name, ()):
            waiter.set()
        if event not in ("DELETED", UNDECODABLE):
            for queue, match in self.matchers.items():
                if match(obj):
                    queue.put_nowait(obj)

    def subscribe(self, name: str, waiter: asyncio.Event | None = None) -> asyncio.Event:
        """An Event set whenever the object called ``name`` changes (``waiter``: that Event, also
        set for other names it is subscribed to)."""
        waiter = waiter if waiter is not None else asyncio.Event()
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
        self.matchers[queue] = match
        return queue

    def unsubscribe_matching(self, queue: asyncio.Queue[Obj]) -> None:
        self.matchers.pop(queue, None)

    def _started(self) -> Informer:
        if self.informer is None:
            raise RuntimeError(f"the shared watch of {self.path} is used before it started")
        return self.informer

    async def synced(self) -> None:
        await self._started().synced.wait()

    def is_synced(self) -> bool:
        return self.informer is not None and self.informer.synced.is_set()

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._started().get((namespace, name))

    def objects(self) -> list[Obj]:
        return list(self._started().cache.values())

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
            try:
                await watch.start()
            except BaseException:
                await watch.hook.close()
                raise
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
