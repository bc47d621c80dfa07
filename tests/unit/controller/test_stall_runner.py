"""What the runner tells the pure core for hang detection (reconcile/stall.py): whether the job's
reports can reach this controller now (``Observed.progress_heard``), and since when it listens
(``Observed.progress_since``, its workers' start)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from airflow_t9k.controller.reconcile.push import PushTarget
from airflow_t9k.controller.runner import Controller, Settings
from tests.builders import generic

KEY = ("GenericJob", "ns", "j")
PUSH = PushTarget("https://10.88.0.1:8443", "ca")


def controller(**settings) -> Controller:
    return Controller(kube=None, settings=Settings(namespaces=["ns"], kinds=["GenericJob"], **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "refused", "pushed", "heard"),
    [
        ({}, False, False, True),  # its reporting replica's log is followed (or will be, once it starts)
        ({}, True, False, False),  # every stream taken: its lines go unread
        ({"progress_push": PUSH}, True, False, False),  # it may only print: unread
        ({"progress_push": PUSH}, True, True, True),  # it pushes: heard
        ({"progress_push": PUSH, "progress_streams": 0}, False, False, True),  # push is the only path
        ({"progress_streams": 0}, False, False, False),  # no path at all
    ],
)
def test_whether_the_job_is_heard(settings, refused, pushed, heard):
    c = controller(**settings)
    if refused and c.reports is not None:
        c.reports._refused.add(KEY)
    report = {"replica": "j-worker-0", "time": "2026-11-25T12:00:00Z", "values": {"step": 1}} if pushed else None
    assert c.hears(KEY, report) is heard


def test_silence_is_counted_from_the_workers_start():
    c = controller()
    assert c.observed(generic("j")).progress_since is None

    async def start() -> None:
        tasks = c._start_workers()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    before = datetime.now(timezone.utc)
    asyncio.run(start())
    observed = c.observed(generic("j"))
    assert observed.progress_since is not None
    assert observed.progress_since >= before
    assert observed.progress_heard is True
