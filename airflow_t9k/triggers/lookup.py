"""Find the job a label selector names, among the objects a shared watch holds, waiting for it to
appear: the deferred sensor's first step when it was given labels (or a task) instead of a name.
The one match, or the newest try's job when the matches are one task's jobs (``api/follow.py``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_t9k.api import selector
from airflow_t9k.api.follow import Ambiguous, choose
from airflow_t9k.k8s.errors import is_permanent

if TYPE_CHECKING:
    from airflow_t9k.triggers.shared_watch import SharedWatch

Obj = dict[str, Any]


class LookupFailed(Exception):
    """The selector matches jobs of more than one task, or the watch cannot serve: the wait is over."""


def matcher(namespace: str, label_selector: str) -> Callable[[Obj], bool]:
    match = selector.parse(label_selector)

    def ours(obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        return meta.get("namespace") == namespace and match(meta.get("labels"))

    return ours


def chosen(watch: SharedWatch, ours: Callable[[Obj], bool], label_selector: str) -> Obj | None:
    """The job to follow among what the watch holds now (``LookupFailed`` when ambiguous)."""
    try:
        return choose([o for o in watch.objects() if ours(o)], f"label selector {label_selector!r}")
    except Ambiguous as exc:
        raise LookupFailed(str(exc)) from None


async def wait_for_match(watch: SharedWatch, namespace: str, label_selector: str) -> str:
    """The name of the job in ``namespace`` to follow for ``label_selector``, once there is one."""
    ours = matcher(namespace, label_selector)
    arriving = watch.subscribe_matching(ours)
    try:
        while True:
            failure = watch.failure
            if failure is not None and is_permanent(failure):
                raise LookupFailed(str(getattr(failure, "message", failure)))
            if watch.is_synced():
                found = chosen(watch, ours, label_selector)
                if found is not None:
                    return str(found["metadata"]["name"])
            # a new match wakes it at once; the timeout only rechecks the watch's health
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(arriving.get(), 2.0)
    finally:
        watch.unsubscribe_matching(arriving)
