"""List once, then watch: a cache of one resource kind that tells a handler what changed.

Level-triggered: handlers get the object's key, never a diff, and the reconciler reads
the cache. A watch that ends is resumed from the last resourceVersion seen (bookmarks keep
it fresh); a 410 Gone, or a failure to resume, lists again. There is no periodic relist.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from airflow_t9k.k8s.client import Kube
from airflow_t9k.k8s.errors import ApiError, Gone

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, Obj], None]  # (event type, object)

log = logging.getLogger(__name__)


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name"))


def _rv(obj: Obj) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


class Informer:
    def __init__(self, kube: Kube, path: str, *, kind: str, label_selector: str | None = None,
                 handler: Handler | None = None, watch_timeout: int = 300) -> None:  # fmt: skip
        self.kube = kube
        self.path = path
        self.kind = kind
        self.label_selector = label_selector
        self.handlers: list[Handler] = [handler] if handler else []
        self.watch_timeout = watch_timeout
        self.cache: dict[Key, Obj] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.lists = 0  # how often a full list happened: once, plus once per 410
        self.healthy = True

    # -- cache, also written optimistically by the executor ---------------------------------
    def get(self, key: Key) -> Obj | None:
        return self.cache.get(key)

    def store(self, obj: Obj) -> None:
        """Keep the newer of the cached and the given object."""
        obj.setdefault("kind", self.kind)
        key = key_of(obj)
        old = self.cache.get(key)
        if old is not None and (_rv(old) or 0) > (_rv(obj) or 0) and _rv(obj) is not None:
            return
        self.cache[key] = obj

    def forget(self, obj: Obj) -> None:
        self.cache.pop(key_of(obj), None)

    def _notify(self, event: str, obj: Obj) -> None:
        for handler in self.handlers:
            try:
                handler(event, obj)
            except Exception:  # a handler bug must not stop the watch
                log.exception("%s handler failed for %s", self.kind, key_of(obj))

    # -- list and watch ---------------------------------------------------------------------
    async def _list(self) -> None:
        query = {"labelSelector": self.label_selector} if self.label_selector else None
        items, rv = await self.kube.list_all(self.path, query=query)
        self.lists += 1
        fresh = {}
        for item in items:
            item.setdefault("kind", self.kind)
            fresh[key_of(item)] = item
        gone = [obj for key, obj in self.cache.items() if key not in fresh]
        self.cache = fresh
        self.resource_version = rv
        for obj in gone:
            self._notify("DELETED", obj)
        for obj in fresh.values():
            self._notify("ADDED", obj)
        self.synced.set()

    async def run(self) -> None:
        self._backoff = 0.5
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch_once()
            except Gone:
                log.info("%s watch expired (410); listing again", self.kind)
                need_list = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: back off and resume, never give up watching
                self.healthy = False
                log.warning("%s watch failed: %s; retrying in %.1fs", self.kind, exc, self._backoff)
                await asyncio.sleep(self._backoff)
                self._backoff = min(self._backoff * 2, 30.0)

    def _opened(self) -> None:
        self.healthy = True
        self._backoff = 0.5

    async def _watch_once(self) -> None:
        query: dict[str, Any] = {"resourceVersion": self.resource_version}
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        async for event in self.kube.watch(self.path, query=query, timeout_seconds=self.watch_timeout, on_open=self._opened):
            etype, obj = event.get("type"), event.get("object") or {}
            if etype == "ERROR":
                if obj.get("code") == 410:
                    raise Gone(410, "Expired", str(obj.get("message")))
                raise ApiError(int(obj.get("code") or 500), str(obj.get("reason")), str(obj.get("message")))
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.resource_version = str(rv)
            if etype == "BOOKMARK":
                continue
            if etype == "DELETED":
                self.forget(obj)
            else:
                self.store(obj)
            self._notify(str(etype), obj)
