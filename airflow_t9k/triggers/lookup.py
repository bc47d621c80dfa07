"""Find the one job a label selector names, among the objects a shared watch holds, waiting for
it to appear: the deferred sensor's first step when it was given labels instead of a name."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from airflow_t9k.api import selector
from airflow_t9k.k8s.errors import is_permanent

if TYPE_CHECKING:
    from airflow_t9k.triggers.shared_watch import SharedWatch

Obj = dict[str, Any]


class LookupFailed(Exception):
    """The selector matches more than one job, or the watch cannot serve: the wait is over."""


async def wait_for_match(watch: SharedWatch, namespace: str, label_selector: str) -> str:
    """The name of the one job in ``namespace`` matching ``label_selector``, once there is one."""
    match = selector.parse(label_selector)

    def ours(obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        return meta.get("namespace") == namespace and match(meta.get("labels"))

    arriving = watch.subscribe_matching(ours)
    try:
        while True:
            failure = watch.failure
            if failure is not None and is_permanent(failure):
                raise LookupFailed(str(getattr(failure, "message", failure)))
            if watch.is_synced():
                found = sorted(o["metadata"]["name"] for o in watch.objects() if ours(o))
                if len(found) > 1:
                    raise LookupFailed(f"label selector {label_selector!r} matches {len(found)} jobs ({', '.join(found)}); "
                                       "it must match one")  # fmt: skip
                if found:
                    return found[0]
            # a new match wakes it at once; the timeout only rechecks the watch's health
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(arriving.get(), 2.0)
    finally:
        watch.unsubscribe_matching(arriving)
