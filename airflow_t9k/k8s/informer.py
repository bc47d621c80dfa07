"""List once, then watch: a cache of one resource kind that tells a handler what changed.

Level-triggered: handlers get the object's key, never a diff, and the reconciler reads
the cache. A watch that ends is resumed from the last resourceVersion seen (bookmarks keep
it fresh); a 410 Gone, or a resourceVersion the server does not have yet (a restarted API
server), lists again. There is no periodic relist.

An optional ``transform`` is applied to every object before it is cached or handed to a
handler (list items, watch events, and what ``store`` is given): the controller keeps only the
fields it reads (controller/slim.py). An optional ``keep`` predicate decides before that
whether the object is cached at all: the label the controller selects on can be put on any
object by anyone who may create one, so the caches of children keep only those a job owns (a
tenant's 1 MB ConfigMaps with our label would otherwise grow the controller until it is
OOM-killed). An object that stops passing ``keep`` is dropped as if deleted. ``keep`` reads
only an object's metadata, and is asked before the object is decoded: of a list page from its
kind and metadata alone (the rest of the answer is skipped, never built), of a watch event the
same; the transform is applied page by page, and ``page`` bounds one answer (a page of 500 such
ConfigMaps would be 500 MB in one response).

Failures back off with jitter up to a few seconds only: an API server that comes back must
find the controller reconnected within seconds, and a restarted API server answers 429
("storage is (re)initializing") for a moment, which must not cost a long sleep.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any

from airflow_t9k.k8s.aio import within
from airflow_t9k.k8s.client import UNDECODABLE, Kube
from airflow_t9k.k8s.errors import ApiError, Gone

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, Obj], None]  # (event type, object)
Transform = Callable[[Obj], Obj]
Keep = Callable[[Obj], bool]

log = logging.getLogger(__name__)


class Backoff:
    """Exponential back-off with jitter, capped low; reset once a watch is open again."""

    def __init__(self, initial: float = 0.2, cap: float = 5.0, rand: Callable[[], float] = random.random) -> None:
        self.initial = initial
        self.cap = cap
        self.rand = rand
        self.failures = 0

    def next(self, retry_after: float | None = None) -> float:
        """Seconds to wait before the next attempt.

        A server that says when to come back (429 while its storage initializes: 1 s) is
        believed, however long the outage before it was; otherwise the wait doubles.
        """
        ceiling = min(self.cap, self.initial * 2 ** min(self.failures, 32))
        self.failures += 1
        if retry_after is not None and retry_after > 0:
            return min(self.cap, retry_after * (1 + 0.2 * self.rand()))
        # Between half and all of the ceiling: restarted clients do not all come back at once.
        return ceiling * (0.5 + 0.5 * self.rand())

    def reset(self) -> None:
        self.failures = 0


def retry_after(exc: BaseException) -> float | None:
    """The Retry-After a 429/5xx Status carries in details.retryAfterSeconds, if any."""
    details = (getattr(exc, "body", None) or {}).get("details") or {}
    value = details.get("retryAfterSeconds")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def needs_relist(exc: BaseException) -> bool:
    """A restarted API server's watch cache may not have our resourceVersion yet (504 Timeout,
    cause ResourceVersionTooLarge); watching from it again would fail the same way."""
    if not isinstance(exc, ApiError):
        return False
    causes = ((exc.body.get("details") or {}).get("causes")) or []
    return any(c.get("reason") == "ResourceVersionTooLarge" for c in causes if isinstance(c, dict)) or (
        "too large resource version" in exc.message.lower()
    )


# A connection can die without being closed (an API server host that vanished behind a load
# balancer sends no reset): after this long with nothing received, the watch is opened again
# instead of waiting out its 5 minutes. Silence alone is no failure: the API server's minutely
# bookmark only comes once its watch cache for the resource has seen an event (or etcd's progress
# notice, every 10 minutes by default), so the watch of a kind nobody wrote since the API server
# started, or since its CRD last changed, is silent for its whole timeout.
IDLE_TIMEOUT = 90.0


class WatchIdle(Exception):
    """Nothing received for ``IDLE_TIMEOUT``; ``opened``: the API server had accepted the watch."""

    def __init__(self, message: str, opened: bool) -> None:
        super().__init__(message)
        self.opened = opened


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name"))


def _rv(obj: Obj) -> int | None:
    return _version((obj.get("metadata") or {}).get("resourceVersion"))


def _version(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class Informer:
    def __init__(self, kube: Kube, path: str, *, kind: str, label_selector: str | None = None,
                 handler: Handler | None = None, watch_timeout: int = 300,
                 on_recovered: Callable[[], None] | None = None, idle_timeout: float = IDLE_TIMEOUT,
                 transform: Transform | None = None, keep: Keep | None = None, page: int = 500,
                 body: Keep | None = None) -> None:  # fmt: skip
        self.kube = kube
        self.path = path
        self.kind = kind
        self.label_selector = label_selector
        self.handlers: list[Handler] = [handler] if handler else []
        self.watch_timeout = watch_timeout
        self.idle_timeout = idle_timeout
        self.cache: dict[Key, Obj] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.lists = 0  # how often a full list happened: once, plus once per 410
        self.healthy = True
        self.backoff = Backoff()
        # Called when a watch opens again after failing: whatever failed meanwhile can be retried now.
        self.on_recovered = on_recovered
        self.transform = transform
        self.keep = keep
        self.page = page
        # Which objects kept are read past their kind and metadata (None: all): what the
        # transform would drop anyway is never decoded (an evidence ConfigMap's data).
        self.body = body
        self.dropped = 0  # objects left out of the cache by ``keep``

    # -- cache, also written optimistically by the executor ---------------------------------
    def get(self, key: Key) -> Obj | None:
        return self.cache.get(key)

    def store(self, obj: Obj) -> None:
        """Keep the newer of the cached and the given object (transformed first)."""
        self._store(self._shaped(obj))

    def remember(self, obj: Obj) -> bool:
        """Cache what one of our writes returned, so the next pass does not act on a cache behind
        our own writes; unless the watch has passed that version: it brought that object (or a
        later one), or the object's deletion, which a late store must not undo."""
        rv = _rv(obj)
        if rv is not None and rv <= (_version(self.resource_version) or 0):
            return False
        self.store(obj)
        return True

    def _kept(self, obj: Obj, count: bool = True) -> bool:
        if self.keep is None:
            return True
        try:
            kept = self.keep(obj)
        except Exception:  # a hostile object must not stop the watch: leave it out
            log.exception("%s keep failed for %s; leaving it out", self.kind, key_of(obj))
            kept = False
        if not kept and count:
            self.dropped += 1
        return kept

    def _admit(self, etype: str, stub: Obj) -> bool:
        """Whether a watch event is decoded whole: what concerns an object in the cache, and what
        ``keep`` keeps. The deletion of an object never cached comes as its stub (enough to say so)."""
        return key_of(stub) in self.cache or (etype != "DELETED" and self._kept(stub, count=False))

    def _shaped(self, obj: Obj) -> Obj:
        """The object as the cache keeps it: with its kind, and through the transform."""
        obj.setdefault("kind", self.kind)
        if self.transform is None:
            return obj
        try:
            return self.transform(obj)
        except Exception:  # a transform bug must not stop the watch: keep the object whole
            log.exception("%s transform failed for %s; caching it whole", self.kind, key_of(obj))
            return obj

    def _store(self, obj: Obj) -> None:
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
        skipped_before = len(self.kube.skipped)
        admit = (lambda obj: self._kept({**obj, "kind": obj.get("kind") or self.kind})) if self.keep is not None else None
        items, rv = await self.kube.list_all(self.path, query=query, page=self.page, admit=admit, shape=self._shaped,
                                             body=self.body)  # fmt: skip
        for identity in self.kube.skipped[skipped_before:]:
            self._notify(UNDECODABLE, {"kind": identity.get("kind") or self.kind, "metadata": identity})
        self.lists += 1
        fresh = {key_of(item): item for item in items}
        gone = [obj for key, obj in self.cache.items() if key not in fresh]
        self.cache = fresh
        self.resource_version = rv
        for obj in gone:
            self._notify("DELETED", obj)
        for obj in fresh.values():
            self._notify("ADDED", obj)
        self.synced.set()

    async def run(self) -> None:
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
            except WatchIdle as exc:
                if exc.opened:
                    # Accepted, then quiet: open it again from the same resourceVersion, which loses
                    # no event (or answers 410). Not a failure: no backoff, and /readyz stays 200.
                    log.debug("%s watch quiet for %.0fs; opening it again", self.kind, self.idle_timeout)
                else:  # not even accepted: the API server is not answering
                    await asyncio.sleep(self._failed(exc))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: back off and resume, never give up watching
                need_list = need_list or needs_relist(exc)
                await asyncio.sleep(self._failed(exc))

    def _failed(self, exc: BaseException) -> float:
        """Mark the watch failing (/readyz says so) and return how long to wait before retrying."""
        self.healthy = False
        delay = self.backoff.next(retry_after(exc))
        log.warning("%s watch failed: %s; retrying in %.1fs", self.kind, exc, delay)
        return delay

    def _opened(self) -> None:
        recovered = not self.healthy
        self.healthy = True
        self.backoff.reset()
        if recovered and self.on_recovered is not None:
            try:
                self.on_recovered()
            except Exception:
                log.exception("%s recovery hook failed", self.kind)

    async def _watch_once(self) -> None:
        query: dict[str, Any] = {"resourceVersion": self.resource_version}
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        opened = False

        def on_open() -> None:
            nonlocal opened
            opened = True
            self._opened()

        stream = self.kube.watch(self.path, query=query, timeout_seconds=self.watch_timeout, on_open=on_open,
                                 admit=self._admit if self.keep is not None else None, body=self.body)  # fmt: skip
        try:
            while True:
                try:
                    event = await within(stream.__anext__(), self.idle_timeout)
                except StopAsyncIteration:
                    return
                except asyncio.TimeoutError:
                    what = "nothing received" if opened else "no answer to the watch request"
                    raise WatchIdle(f"{what} for {self.idle_timeout:g}s", opened) from None
                self._handle(event)
        finally:
            await stream.aclose()

    def _handle(self, event: Obj) -> None:
        etype, obj = event.get("type"), event.get("object") or {}
        if etype == "ERROR":
            if obj.get("code") == 410:
                raise Gone(410, "Expired", str(obj.get("message")))
            raise ApiError(int(obj.get("code") or 500), str(obj.get("reason")), str(obj.get("message")), obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = str(rv)
        if etype == "BOOKMARK":
            return
        if etype == UNDECODABLE:  # left out of the cache; the handler may report it
            self._notify(etype, obj)
            return
        if etype != "DELETED" and not self._kept(obj):
            if key_of(obj) not in self.cache:
                return
            etype = "DELETED"  # it was ours and is not any more (its owner reference was removed)
        obj = self._shaped(obj)
        if etype == "DELETED":
            self.forget(obj)
        else:
            self._store(obj)
        self._notify(str(etype), obj)
