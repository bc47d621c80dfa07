"""Following the reporting replica's log of every running job, for ``status.progress``.

One stream per job: the log of the replica whose success decides it (the master, chief,
launcher or rank 0, ``JobKind.decisive_replica``), its training container, read with
``follow=true&timestamps=true`` from when that pod started. Lines that carry ``T9K_PROGRESS``
are parsed (``api/progress.py``) and merged into the job's latest values; the job is then
queued, at most once per ``interval`` seconds, and ``plan`` folds the values into the status
(``reconcile/reporting.py``), which it writes at most as often.

Started and stopped by the reconcile pass (``sync``), which never waits for a stream: a
stream opens once the pod's container has run for ``interval`` seconds (or has ended), follows
a restarted replica's new pod,
and stops a little after the pod ends (a real kubelet ends the stream itself; kwok's never
ends) and when the job is deleted or its namespace stops being managed. A job that had already
ended gets none: after a restart of the controller its finished jobs' logs are not read again,
and a stream opened again for a running job goes on from ``status.progress.reportedAt``.
Streams use their own connection pool (``cli.py``), so a hundred open logs never hold a connection a reconcile
pass needs, and at most ``max_streams`` are open at once.

The cap is shared fairly between namespaces: while streams are free, any job gets one; once
they are all taken, a namespace holding fewer than its share (``max_streams`` divided by the
namespaces that want streams) takes one from the namespace holding the most, above its share.
So one tenant running hundreds of jobs cannot leave every other tenant's jobs without progress,
and no stream is taken from a namespace within its share. A job refused (or whose stream was
taken) is queued again whenever a stream closes.

Why a new pod's stream waits one ``interval``: a value is written at most once per interval
anyway, and the log is read from the container's start, so nothing printed is lost; but a wave of
jobs starting together no longer opens a log stream per job (the API server proxying each to a
kubelet) while the wave's pods are still being created. With the Services' wave (apply.py), it
took 11-12% off the time to every job Running at 100 and 200 jobs created at once
(docs/benchmarks.md, "Session 30"). The first value shows at most one interval later.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_t9k.api.outcome import interpret, parse_time
from airflow_t9k.api.paths import child_path
from airflow_t9k.api.progress import MARKER, MAX_LINE, merge, parse_line
from airflow_t9k.controller.logs import outside_pass
from airflow_t9k.controller.reconcile.observe import is_deleting
from airflow_t9k.controller.reconcile.reporting import LATEST, PROGRESS
from airflow_t9k.k8s.errors import Forbidden
from airflow_t9k.kinds.registry import KINDS

if TYPE_CHECKING:
    from airflow_t9k.k8s.multiplexed import LineSource
    from airflow_t9k.kinds.base import Obj

log = logging.getLogger(__name__)

GRACE = 3.0  # seconds a stream goes on after its pod ended, for the lines printed last
RETRY = (1.0, 30.0)  # back-off between attempts to open a stream: first, cap
REOPEN = 600.0  # a stream is closed and opened again after this long (a half-open connection ends)
_MARKER = MARKER.encode()


def reporting_pod(job: Obj, pods: Mapping[str, Obj]) -> tuple[Obj, str | None] | None:
    """The pod whose log carries the job's progress, and its training container's name; None
    when the job has no such replica (BeamJob) or its pod has not started."""
    kind = KINDS.get(str(job.get("kind")))
    if kind is None:
        return None
    try:
        decisive = kind.decisive_replica(job)
        name = kind.pod_name(job, *decisive) if decisive is not None else None
    except Exception:  # noqa: BLE001 - a spec the controller refuses: nothing runs to follow
        return None
    pod = pods.get(name) if name else None
    if pod is None or is_deleting(pod) or started(pod) is None:
        return None
    container = kind.main_container(pod.get("spec") or {}) or {}
    return pod, container.get("name")


def started(pod: Obj) -> str | None:
    """When the pod's first container started (running or ended), None before that."""
    times = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        when = (state.get("running") or state.get("terminated") or {}).get("startedAt")
        if when:
            times.append(str(when))
    return min(times) if times else None


def container_id(pod: Obj, container: str | None) -> str | None:
    """The ID of the followed container's current run (None before it has one)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if container is None or cs.get("name") == container:
            return str(cs.get("containerID") or "") or None
    return None


def ended(pod: Obj) -> bool:
    return str((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed")


def _stamp(raw: str) -> str:
    """A log line's RFC 3339 (nano) timestamp, to the second."""
    return raw[:19] + "Z" if len(raw) >= 19 else raw


def namespace_of(key: Hashable) -> str:
    """The namespace in a job's key ((kind, namespace, name), as the runner queues it)."""
    return str(key[1]) if isinstance(key, tuple) and len(key) >= 2 else ""


def recorded_values(status: Obj | None) -> Obj:
    """The values ``status.progress`` holds, as a report's (so a stream opened again after a
    restart of the controller goes on from them instead of from nothing)."""
    progress = (status or {}).get(PROGRESS)
    if not isinstance(progress, dict):
        return {}
    out: Obj = {key: progress[name] for key, name in LATEST if name in progress}
    if isinstance(progress.get("metrics"), dict):
        out["metrics"] = dict(progress["metrics"])
    return out


class Stream:
    """One job's followed log and the values read from it so far."""

    def __init__(self, uid: str, values: Obj) -> None:
        self.uid = uid
        self.pod_uid: str | None = None
        self.instance: str | None = None  # the followed container's ID: a restart in place gives a new one
        self.pod = ""
        self.values = values
        self.time: str | None = None  # the last report's timestamp (to the second)
        self.last: str = ""  # the full timestamp of the last report line read: lines up to it are skipped after a reopen
        self.task: asyncio.Task[None] | None = None
        self.opened = 0.0  # loop time the current stream opened (the latest goes first when one is taken)
        self.stopping: asyncio.TimerHandle | None = None
        self.notify_at = 0.0
        self.pending: asyncio.TimerHandle | None = None

    @property
    def active(self) -> bool:
        return self.task is not None and not self.task.done()

    def cancel(self) -> None:
        for handle in (self.stopping, self.pending):
            if handle is not None:
                handle.cancel()
        self.stopping = self.pending = None
        if self.task is not None:
            self.task.cancel()


class ProgressStreams:
    def __init__(self, kube: LineSource, notify: Callable[[Hashable], None], metrics: Any, interval: float = 10.0,
                 max_streams: int = 200) -> None:  # fmt: skip
        self.kube = kube
        self.notify = notify  # queues a job
        self.metrics = metrics  # the controller's Counter
        self.interval = interval
        self.max_streams = max_streams
        self.streams: dict[Hashable, Stream] = {}
        self._refused: set[Hashable] = set()
        self._waiting: dict[Hashable, asyncio.TimerHandle] = {}  # new pods' streams due once they ran an interval

    def active(self) -> int:
        return sum(1 for s in self.streams.values() if s.active)

    def refused(self, key: Hashable) -> bool:
        """The job's log is not followed: the streams are all taken (``--progress-streams``), so its
        silence says nothing (hang detection, reconcile/stall.py)."""
        return key in self._refused

    def report(self, key: Hashable, uid: str | None) -> Obj | None:
        """What the job's replica reported so far, for ``Observed.report``; None before anything."""
        s = self.streams.get(key)
        if s is None or s.uid != uid or s.time is None:
            return None
        values = {k: dict(v) if isinstance(v, dict) else v for k, v in s.values.items()}  # a copy: plan may run in a thread
        return {"replica": s.pod, "time": s.time, "values": values}

    def sync(self, key: Hashable, job: Obj, pods: Mapping[str, Obj], managed: bool = True) -> None:
        """Start, keep or stop the job's stream for what this pass sees. Never waits."""
        uid = str(job["metadata"].get("uid") or "")
        s = self.streams.get(key)
        if s is not None and s.uid != uid:  # another job of the same name
            self.forget(key)
            s = None
        found = reporting_pod(job, pods) if managed and not job["metadata"].get("deletionTimestamp") else None
        # A job that had ended before this pass gets no new stream: what its replica printed was
        # read while it ran, or in the pass that saw it end (after a restart of the controller,
        # its finished jobs' logs are not read again).
        ended_before = interpret(job).terminal
        if found is None or (ended_before and (s is None or s.pod_uid != str(found[0]["metadata"].get("uid") or ""))):
            if s is not None and s.active:
                self._stop_soon(s) if managed else s.cancel()
            return
        pod, container = found
        pod_uid = str(pod["metadata"].get("uid") or "")
        if s is None:
            s = self.streams[key] = Stream(uid, recorded_values(job.get("status")))
            recorded = (job.get("status") or {}).get(PROGRESS)
            if (
                isinstance(recorded, dict)
                and recorded.get("replica") == pod["metadata"].get("name")
                and recorded.get("reportedAt")
            ):
                s.time = str(recorded["reportedAt"])  # go on from there, not from the pod's start
        instance = container_id(pod, container)
        # The same pod with a new container (restarted in place, reconcile/inplace.py): the open
        # stream may hang on the container that ended, so it is opened again, on the one running.
        # Also when the stream was closed meanwhile: a pass that saw the pod with no container
        # started (waiting between the two) stopped it, and a restart slower than GRACE let it close.
        restarted = s.pod_uid == pod_uid and instance is not None and instance != s.instance
        was_active = s.active
        if s.pod_uid != pod_uid and not ended(pod) and self._not_yet(key, pod):
            return
        if s.pod_uid != pod_uid or restarted:
            if s.active:
                s.cancel()
            if not (restarted and was_active) and self.active() >= self.max_streams and not self._make_room(key):
                if key not in self._refused:
                    self._refused.add(key)
                    self.metrics["progress_stream_refused"] += 1
                    log.warning(
                        "not following %s's progress: %d log streams are open (--progress-streams)", key, self.max_streams
                    )
                return
            self._refused.discard(key)
            if not restarted:  # a new pod's log is read from its start; the same pod's goes on after s.last
                s.last = ""
            s.pod_uid, s.pod, s.instance = pod_uid, str(pod["metadata"]["name"]), instance
            since = started(pod) or ""
            if s.time and s.time >= _stamp(since):  # values recorded from this pod: go on from there
                since = s.time
            s.stopping = None
            s.opened = asyncio.get_running_loop().time()
            follow = self._follow(key, s, job["metadata"]["namespace"], container, since)
            # The job's stream, but not the pass's: it outlives the pass that opens it (logs.py).
            s.task = outside_pass(keep_job=True).run(asyncio.get_running_loop().create_task, follow)
            self.metrics["progress_stream_open"] += 1
        if ended(pod) or ended_before:
            self._stop_soon(s)

    def _not_yet(self, key: Hashable, pod: Obj) -> bool:
        """Whether the running pod's container started less than an interval ago; the job is queued
        again when it has run that long (one timer per job)."""
        start = parse_time(started(pod))
        wait = 0.0 if start is None else self.interval - (datetime.now(timezone.utc) - start).total_seconds()
        if wait <= 0:
            return False
        if key not in self._waiting:
            self._waiting[key] = asyncio.get_running_loop().call_later(wait, self._due, key)
        return True

    def _due(self, key: Hashable) -> None:
        self._waiting.pop(key, None)
        self.notify(key)

    def _make_room(self, key: Hashable) -> bool:
        """Take a stream for ``key``'s namespace from the namespace holding the most, when that one
        holds more than its share and ``key``'s holds less (the cap shared fairly: see above)."""
        held = Counter(namespace_of(k) for k, s in self.streams.items() if s.active)
        ns = namespace_of(key)
        wanting = set(held) | {ns} | {namespace_of(k) for k in self._refused}
        share = max(1, self.max_streams // len(wanting))
        if held[ns] >= share:
            return False
        richest, most = max(held.items(), key=lambda item: (item[1], item[0]))
        if most <= share:
            return False
        victim = max((k for k, s in self.streams.items() if s.active and namespace_of(k) == richest),
                     key=lambda k: self.streams[k].opened)  # fmt: skip
        taken = self.streams[victim]
        taken.cancel()
        taken.task, taken.pod_uid = None, None  # its job gets a stream again when one is free
        self._refused.add(victim)
        self.metrics["progress_stream_yielded"] += 1
        log.info("progress stream of %s handed to %s: namespace %s holds %d of %d streams, its share is %d",
                 victim, key, richest, most, self.max_streams, share)  # fmt: skip
        return True

    def _stop_soon(self, s: Stream) -> None:
        if s.stopping is None and s.active:
            s.stopping = asyncio.get_running_loop().call_later(GRACE, self._close, s)

    def _close(self, s: Stream) -> None:
        s.cancel()
        self._freed()

    def _freed(self) -> None:
        """A stream closed: as many jobs left without one as there are free streams get a pass
        (their sync opens one if it may), those of the namespaces holding the fewest first."""
        free = self.max_streams - self.active()
        if free <= 0 or not self._refused:
            return
        held = Counter(namespace_of(k) for k, s in self.streams.items() if s.active)
        for key in sorted(self._refused, key=lambda k: held[namespace_of(k)])[:free]:
            self.notify(key)

    def forget(self, key: Hashable) -> None:
        """The job is gone: stop its stream and drop what it read."""
        s = self.streams.pop(key, None)
        self._refused.discard(key)
        timer = self._waiting.pop(key, None)
        if timer is not None:
            timer.cancel()
        if s is not None:
            was_active = s.active
            s.cancel()
            if was_active:
                self._freed()

    async def close(self) -> None:
        for timer in self._waiting.values():
            timer.cancel()
        self._waiting.clear()
        streams = list(self.streams.values())
        for s in streams:
            s.cancel()
        await asyncio.gather(*(s.task for s in streams if s.task is not None), return_exceptions=True)
        self.streams.clear()

    # -- the stream --------------------------------------------------------------------------
    async def _follow(self, key: Hashable, s: Stream, namespace: str, container: str | None, since: str) -> None:
        path = child_path("Pod", namespace, s.pod, "log")
        delay = RETRY[0]
        while True:
            query: dict[str, Any] = {"follow": True, "timestamps": True, "container": container}
            start = s.last or since
            if start:
                query["sinceTime"] = _stamp(start)
            try:
                async for raw in self.kube.lines(path, query=query, timeout=REOPEN, max_line=MAX_LINE + 64):
                    delay = RETRY[0]
                    if _MARKER in raw:
                        self._line(key, s, raw)
            except asyncio.CancelledError:
                raise
            except Forbidden as exc:  # the controller's RBAC lacks pods/log get: say so, it will not heal alone
                log.warning("log stream of %s refused: %s", s.pod, exc)
            except Exception as exc:  # noqa: BLE001 - not started yet, gone, unreachable, timed out: try again
                log.debug("log stream of %s ended: %s", s.pod, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY[1])

    def _line(self, key: Hashable, s: Stream, raw: bytes) -> None:
        stamp, _, text = raw.decode("utf-8", errors="replace").partition(" ")
        if s.last and stamp <= s.last:
            return  # read before the stream was opened again
        s.last = stamp
        report = parse_line(text)
        if report is None:
            self.metrics["progress_line_ignored"] += 1
            return
        self.metrics["progress_line"] += 1
        s.values = merge(s.values, report)
        s.time = _stamp(stamp)
        self._changed(key, s)

    def _changed(self, key: Hashable, s: Stream) -> None:
        """Queue the job now, or when ``interval`` has passed since it was last queued for this."""
        if s.pending is not None:
            return
        loop = asyncio.get_running_loop()
        wait = s.notify_at + self.interval - loop.time()
        if wait <= 0:
            s.notify_at = loop.time()
            self.notify(key)
            return

        def fire() -> None:
            s.pending = None
            s.notify_at = loop.time()
            self.notify(key)

        s.pending = loop.call_later(wait, fire)
