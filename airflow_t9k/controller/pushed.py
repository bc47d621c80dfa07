"""The latest progress each job's replicas pushed (docs/progress.md, "The push path").

The endpoint (``push_server.py``) merges each accepted report into its job's values here and
queues the job at most once per ``interval`` seconds, as a followed log does
(``reports.py``); the next pass gets the values as ``Observed.report`` and folds them into
``status.progress`` in its own status write (``reconcile/reporting.py``): one writer, the
pass. A job's values start from what its status already holds, so after a restart of the
controller (or a change of leader) a report that carries only some keys loses none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from airflow_t9k.api.progress import merge
from airflow_t9k.controller.push_auth import Bucket
from airflow_t9k.controller.reports import recorded_values

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import Obj


class Entry:
    def __init__(self, uid: str, values: Obj) -> None:
        self.uid = uid
        self.values = values
        self.replica = ""
        self.time: str | None = None  # when the last report arrived, to the second (status.progress.reportedAt)
        self.notify_at = float("-inf")
        self.pending: asyncio.TimerHandle | None = None
        self.bucket: Bucket | None = None


class PushedReports:
    def __init__(self, notify: Callable[[Hashable], None], interval: float, rate: float = 1.0, burst: float = 10.0) -> None:
        self.notify = notify  # queues a job
        self.interval = interval
        self.rate, self.burst = rate, burst
        self.entries: dict[Hashable, Entry] = {}

    def _entry(self, key: Hashable, job: Obj) -> Entry:
        uid = str(job["metadata"].get("uid") or "")
        e = self.entries.get(key)
        if e is None or e.uid != uid:  # another job of the same name starts from nothing
            if e is not None and e.pending is not None:
                e.pending.cancel()
            e = self.entries[key] = Entry(uid, recorded_values(job.get("status")))
        return e

    def admit(self, key: Hashable, job: Obj, now: float) -> float:
        """0 when the job's replicas may push now (counted), else the seconds until they may."""
        e = self._entry(key, job)
        if e.bucket is None:
            e.bucket = Bucket(self.rate, self.burst, now)
        return e.bucket.take(now)

    def add(self, key: Hashable, job: Obj, replica: str, report: Obj, at: datetime | None = None) -> None:
        e = self._entry(key, job)
        e.values = merge(e.values, report)
        e.replica = replica
        e.time = (at or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._changed(key, e)

    def report(self, key: Hashable, uid: str | None) -> Obj | None:
        """What the job's replicas pushed so far, for ``Observed.report``; None before anything."""
        e = self.entries.get(key)
        if e is None or e.uid != uid or e.time is None:
            return None
        values = {k: dict(v) if isinstance(v, dict) else v for k, v in e.values.items()}  # a copy: plan may run in a thread
        return {"replica": e.replica, "time": e.time, "values": values}

    def forget(self, key: Hashable) -> None:
        e = self.entries.pop(key, None)
        if e is not None and e.pending is not None:
            e.pending.cancel()

    def clear(self) -> None:
        for key in list(self.entries):
            self.forget(key)

    def _changed(self, key: Hashable, e: Entry) -> None:
        """Queue the job now, or once ``interval`` has passed since it was last queued for this."""
        if e.pending is not None:
            return
        loop = asyncio.get_running_loop()
        wait = e.notify_at + self.interval - loop.time()
        if wait <= 0:
            e.notify_at = loop.time()
            self.notify(key)
            return

        def fire() -> None:
            e.pending = None
            e.notify_at = loop.time()
            self.notify(key)

        e.pending = loop.call_later(wait, fire)


def newest(*reports: Obj | None) -> Obj | None:
    """The report with the latest time (the later argument on a tie): a job that both prints
    ``T9K_PROGRESS`` lines and pushes shows whichever came last."""
    best: Obj | None = None
    for r in reports:
        if r is not None and (best is None or str(r.get("time") or "") >= str(best.get("time") or "")):
            best = r
    return best
