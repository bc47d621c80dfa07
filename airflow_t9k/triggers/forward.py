"""What the trigger forwards into the task log while it waits: the Kubernetes Events of the job
and its pods (from a shared watch, once each, at most ``max_forwarded``) and its replicas' log
lines (one ``follow=true`` stream per replica, no polling; every line of a stream, and after a
reconnect exactly the lines not sent yet, ``api/logcursor.py``; at most ``max_log_lines``). At the
job's end the followers stop and every replica's log is read once more from where it stands:
lines written after a follower's last look reach the task log too (a replica that ran and ended
between two looks at the job, or a job that ended while no triggerer ran).

Every log is split by the bounded ``LineSplitter(log=True)`` (k8s/client.py): a line of megabytes
(a progress bar redrawn with ``\r`` for an hour) comes as its last redraw, at most
``LOG_LINE_BYTES`` after its stamp with the cut mark, and the lines after it still come. A
follower that ends on an error (the stream broke, the API server refused it) says so once at
warning level and is started again, from its cursor, at the job's next change (after
``RESTART_AFTER`` seconds, doubling while it keeps failing; then, when the job does not change):
never a line twice."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_t9k.api.evidence import controlled_by
from airflow_t9k.api.failed import final_header, final_lines, print_lines
from airflow_t9k.api.logcursor import Cursor, instant, since_time, split
from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.paths import LOG_LINE_BYTES, child_path
from airflow_t9k.k8s.aio import within
from airflow_t9k.k8s.errors import is_permanent
from airflow_t9k.triggers import cursors, shared_watch

if TYPE_CHECKING:
    from airflow_t9k.triggers.records import Forwarding

Obj = dict[str, Any]

# The controller records a job's end before it sends the Event that says so (and after the
# clean-up it causes), so the wait that saw the end may be ahead of that Event by a second or
# more on a busy cluster. It gives the Event this long to reach the task log, and no longer: a
# controller that sends none (or other reasons) costs a finished task these seconds at most.
END_EVENT_WAIT = 5.0
ENDING_REASONS = ("Succeeded", "Failed")
# The last read of the replicas' logs at the job's end: after a triggerer's restart it may first
# wait for where the logs stood (``cursors.load``), then reads as long as the outcome's own last
# read may take (``outcome.LAST_READ``). Past it the outcome is reported without those lines.
DRAIN_WITHIN = cursors.LOAD_WITHIN + 15.0
# A follower that ended on an error is started again at the job's next change, or after
# RESTART_AFTER seconds when the job does not change (a long training may not for hours); one that
# keeps failing waits RESTART_AFTER seconds, doubled for each error in a row, up to
# RESTART_AT_MOST: a log the API server keeps refusing costs a request every ten minutes.
RESTART_AFTER = 2.0
RESTART_AT_MOST = 600.0
TIMER_SLACK = 0.1  # seconds: the loop runs a timer up to its clock's resolution early


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class ForwardMixin:
    """Part of ``T9kJobTrigger``: Events and log lines into the task log."""

    log: Any
    name: str
    forwarding: Forwarding
    if TYPE_CHECKING:  # a read-only property of T9kJobTrigger

        @property
        def namespace(self) -> str: ...

        @property
        def kind(self) -> str: ...

    _streamed: dict[str, Cursor]
    _log_ending: Obj | None  # the ended job, once the wait saw its end: the followers stop and drain
    _log_wake: asyncio.Event | None  # wakes the followers' loop
    _log_task: asyncio.Task[None] | None  # _follow_logs, while it runs
    _events_settled: asyncio.Event  # the job's ending Event was seen, or no more will be forwarded

    _watch_key: Any  # the trigger's: (connection, kubeconfig, context, ...) -> one shared watch
    make_hook: Any
    _owner_uid: Any
    _last_job: Obj | None

    def _about_this_job(self, ev: Obj) -> bool:
        """A cheap first cut by name; ``_is_ours`` decides by uid."""
        name = str((ev.get("involvedObject") or {}).get("name") or "")
        return name == self.name or name.startswith(f"{self.name}-")

    async def _is_ours(self, ev: Obj, hook: Any, known: set[str], refused: set[str]) -> bool:
        """Whether the Event is about the job or one of its own pods, by ``involvedObject.uid``:
        anyone who may create Events can name any object in one (a co-tenant's "fix" in the task
        log). A pod uid not known yet is looked up once among the job's own pods."""
        owner = self._owner_uid(self._last_job)
        uid = str((ev.get("involvedObject") or {}).get("uid") or "")
        if not owner or not uid:
            return False
        known.add(owner)
        if uid in known:
            return True
        if uid in refused:
            return False
        try:
            pods = await hook.list_replica_pods(self.name, self.namespace, owner)
        except Exception as exc:  # noqa: BLE001 - unreachable: the Event waits for the next one's lookup
            self.log.debug("could not list the replicas to check an Event: %s", exc)
            return False
        known.update(str((p.get("metadata") or {}).get("uid")) for p in pods)
        if uid in known:
            return True
        refused.add(uid)
        return False

    def _is_ending(self, ev: Obj) -> bool:
        obj = ev.get("involvedObject") or {}
        return obj.get("kind") == self.kind and obj.get("name") == self.name and ev.get("reason") in ENDING_REASONS

    async def ending_event_forwarded(self, cap: float = END_EVENT_WAIT) -> None:
        """Return once the job's own Succeeded or Failed Event went through ``_forward_events``
        (or it stopped forwarding), or after ``cap`` seconds."""
        try:
            await asyncio.wait_for(self._events_settled.wait(), cap)
        except asyncio.TimeoutError:
            self.log.debug("the job's ending Event did not arrive within %gs", cap)

    async def _forward_events(self) -> None:
        """Log new Events of the job and its replica pods, once each, at most ``max_forwarded``."""
        try:
            await self._forward_events_until_cancelled()
        finally:
            self._events_settled.set()  # nothing more will come through here: nobody waits for it

    async def _forward_events_until_cancelled(self) -> None:
        watch = await shared_watch.acquire(self._watch_key(), self.make_hook, child_path("Event", self.namespace), "Event")
        arriving = watch.subscribe_matching(self._about_this_job)
        seen: set[tuple[str, int]] = set()
        since = _parse_time(self.forwarding.events_since) or 0.0
        budget = [self.forwarding.max_forwarded]
        try:
            while not watch.is_synced():
                if watch.failure is not None and is_permanent(watch.failure):
                    # The job's own watch decides the task; Events are a nicety. Say why once.
                    self.log.warning("not forwarding the job's Events: %s", getattr(watch.failure, "message", watch.failure))
                    return
                await asyncio.sleep(0.5)
            # What the shared watch already holds, in order; then each new one as it comes.
            known: set[str] = set()
            refused: set[str] = set()
            for ev in sorted(filter(self._about_this_job, watch.objects()), key=_event_order):
                if await self._is_ours(ev, watch.hook, known, refused):
                    self._forward_event(ev, seen, since, budget)
                    self._note_ending(ev)
            while budget[0] > 0:
                ev = await arriving.get()
                if await self._is_ours(ev, watch.hook, known, refused):
                    self._forward_event(ev, seen, since, budget)
                    self._note_ending(ev)
        finally:
            watch.unsubscribe_matching(arriving)
            await shared_watch.release(watch)

    def _note_ending(self, ev: Obj) -> None:
        # Forwarded now, or earlier (seen, or from before ``events_since``): either way in the log.
        if self._is_ending(ev):
            self._events_settled.set()

    def _forward_event(self, ev: Obj, seen: set[tuple[str, int]], since: float, budget: list[int]) -> None:
        key = (ev["metadata"].get("uid", ""), int(ev.get("count") or 1))
        when = _parse_time(ev.get("lastTimestamp") or ev.get("eventTime")) or 0.0
        if budget[0] <= 0 or key in seen or when + 1 < since:
            return
        seen.add(key)
        budget[0] -= 1
        obj = ev.get("involvedObject") or {}
        self.log.info(
            "[event] %s %s %s/%s: %s", ev.get("type"), ev.get("reason"), obj.get("kind"), obj.get("name"), ev.get("message")
        )
        if budget[0] == 0:
            self.log.info("[event] forwarded %d events; not forwarding more", self.forwarding.max_forwarded)

    async def logs_drained(self, job: Obj) -> None:
        """The job ended: stop following and forward what each replica's log holds beyond where
        it stands (``_drain``), before the outcome is reported. Bounded: the outcome matters
        more than the last lines."""
        task = self._log_task
        if task is None or task.done():
            return
        self._log_ending = job
        if self._log_wake is not None:
            self._log_wake.set()
        try:
            await within(asyncio.shield(task), DRAIN_WITHIN)
        except asyncio.TimeoutError:
            self.log.info("the replicas' last log lines were not all read within %gs", DRAIN_WITHIN)
        except Exception as exc:  # noqa: BLE001 - the outcome matters more than the logs
            self.log.warning("reading the replicas' last log lines failed: %s", exc)

    async def _follow_logs(self, watch: shared_watch.SharedWatch) -> None:
        """Follow every running replica's log (one stream each, no polling); each line once.
        A follower that ended on an error is started again (``Breaks``). Once the job ended
        (``logs_drained``), drain every replica's log instead."""
        waiter = self._log_wake = watch.subscribe(self.name)
        followers: dict[str, tuple[str, asyncio.Task[bool]]] = {}  # pod -> (uid, task)
        last_seen = self._streamed  # pod -> where its forwarded lines stand (failed logs skip those)
        for pod, cursor in (await cursors.load(self)).items():  # where a triggerer before a restart left them
            last_seen.setdefault(pod, cursor)
        budget = [self.forwarding.max_log_lines]
        breaks = Breaks()
        saver = asyncio.create_task(cursors.keep_saved(self, last_seen))
        timers: list[asyncio.TimerHandle] = []
        loop = asyncio.get_running_loop()
        try:
            await watch.synced()
            while budget[0] > 0 and self._log_ending is None:
                waiter.clear()
                for pod, uid in _running_replicas(watch.get(self.namespace, self.name)):
                    if self.forwarding.follow_pods is not None and pod not in self.forwarding.follow_pods:
                        continue
                    current = followers.get(pod)
                    if current is not None and not current[1].done():
                        continue
                    if current is not None and current[0] == uid:
                        if not _ended_on_error(current[1]):
                            continue  # its stream ended (the container did): nothing more to follow
                        if breaks.retry_at.get(pod, 0.0) - loop.time() > TIMER_SLACK:
                            continue  # the timer set when it ended wakes this loop then
                    if current is None and len(followers) >= self.forwarding.max_followed_pods:
                        continue
                    task = asyncio.create_task(self._read_log(watch, pod, last_seen, budget, follow=True, breaks=breaks))
                    task.add_done_callback(functools.partial(self._restart_later, pod=pod, breaks=breaks, waiter=waiter,
                                                             timers=timers))  # fmt: skip
                    followers[pod] = (uid, task)
                await waiter.wait()
            while self._log_ending is None:  # the line budget ran out: wait for the end, for its last lines
                waiter.clear()
                await waiter.wait()
            if budget[0] > 0:
                await self._drain(watch, self._log_ending, followers, last_seen, budget, breaks)
            if budget[0] <= 0:
                await self._final_lines(watch, self._log_ending, last_seen)
        finally:
            for timer in timers:
                timer.cancel()
            watch.unsubscribe(self.name, waiter)
            for _, task in followers.values():
                task.cancel()
            await asyncio.gather(*(t for _, t in followers.values()), return_exceptions=True)
            saver.cancel()
            await asyncio.gather(saver, return_exceptions=True)

    def _restart_later(self, task: asyncio.Task[bool], pod: str, breaks: Breaks, waiter: asyncio.Event,
                       timers: list[asyncio.TimerHandle]) -> None:  # fmt: skip
        """A follower ended: on an error, wake the followers' loop once its pause (``Breaks``)
        is over, to start it again from its cursor."""
        if not _ended_on_error(task) or self._log_ending is not None:
            return
        loop = asyncio.get_running_loop()
        pause = breaks.pause(pod)
        breaks.retry_at[pod] = loop.time() + pause
        timers[:] = [t for t in timers if t.when() > loop.time()]
        timers.append(loop.call_later(max(pause, RESTART_AFTER), waiter.set))

    async def _drain(self, watch: shared_watch.SharedWatch, job: Obj, followers: dict[str, tuple[str, asyncio.Task[bool]]],
                     last_seen: dict[str, Cursor], budget: list[int], breaks: Breaks) -> None:  # fmt: skip
        """Stop the followers, then read each replica's log once, not following, from where its
        cursor stands (from the deferral for one never followed): only lines not forwarded yet
        are printed. A follower is cancelled between two lines, so its cursor says exactly what
        it sent. Of a failed job, the failed replicas are left to the failed-logs report
        (``outcome._failed_logs``), which prints them under their own headers. A replica whose
        read fails is said and skipped: the others are still read."""
        for _, task in followers.values():
            task.cancel()
        await asyncio.gather(*(t for _, t in followers.values()), return_exceptions=True)
        read = set(followers)
        for pod in interpret(job).replicas_read_at_end:
            if budget[0] <= 0:
                return
            if self.forwarding.follow_pods is not None and pod not in self.forwarding.follow_pods:
                continue
            if pod not in read and len(read) >= self.forwarding.max_followed_pods:
                continue
            read.add(pod)
            await self._read_log(watch, pod, last_seen, budget, follow=False, breaks=breaks)

    async def _final_lines(self, watch: shared_watch.SharedWatch, job: Obj, last_seen: dict[str, Cursor]) -> None:
        """The line budget ran out: still, the end of the training reaches the task log. The last
        ``log_tail_lines`` of each replica read at the end (``max_followed_pods`` of them), of what
        was not forwarded yet, under a header that says why they come apart."""
        f = self.forwarding
        pods = [p for p in interpret(job).replicas_read_at_end if f.follow_pods is None or p in f.follow_pods]
        deferred = instant(f.events_since or "")
        for pod in pods[: f.max_followed_pods]:
            cursor = last_seen.get(pod)
            # From its cursor's second, or from the deferral for a replica never followed: never
            # the lines of what ran before this task waited.
            since = (cursor.since() if cursor else None) or (since_time(deferred) if deferred is not None else None)
            try:
                text = await watch.hook.read_log_tail(pod, self.namespace, f.log_tail_lines, timestamps=True, since=since)
            except Exception as exc:  # noqa: BLE001 - the outcome matters more than the lines
                self.log.debug("could not read the last lines of %s: %s", pod, exc)
                continue
            fresh = final_lines(text, cursor, f.log_tail_lines)
            if fresh:
                print_lines(self.log, final_header(pod, len(fresh), f.max_log_lines), fresh)

    async def _read_log(self, watch: shared_watch.SharedWatch, pod: str, last_seen: dict[str, Cursor], budget: list[int],
                        *, follow: bool, breaks: Breaks | None = None) -> bool:  # fmt: skip
        """Forward ``pod``'s log from where its cursor stands; ``follow``: as it is written.
        False when an error ended it (said once a pod at warning level, ``Breaks``), True when
        the log ended, the pod is not the job's, or the line budget is spent."""
        breaks = breaks if breaks is not None else Breaks()
        try:
            kube = await watch.hook.kube()
            # The log is read by the pod's name: only while the pod of that name is the job's own
            # replica (its controller is the job), not one someone else made under that name.
            owner = self._owner_uid(self._last_job or watch.get(self.namespace, self.name))
            found = await watch.hook.get_pod(pod, self.namespace)
            if found is None or not owner or not controlled_by(found, owner):
                self.log.debug("not following %s: not a replica of %s %s", pod, self.name, owner)
                return True
            cursor = last_seen.setdefault(pod, Cursor())
            query: dict[str, Any] = {"follow": follow, "timestamps": True}
            deferred = instant(self.forwarding.events_since or "")
            since = cursor.since() or (since_time(deferred) if deferred is not None else None)
            if since:
                query["sinceTime"] = since
            skip = cursor.resume()  # a reopened stream replays its last second: skip exactly what was sent
            lines = kube.lines(child_path("Pod", self.namespace, pod, "log"), query=query, timeout=None,
                               max_line=LOG_LINE_BYTES, log=True, flush=not follow)  # fmt: skip
            async with contextlib.aclosing(lines):
                async for raw in lines:
                    stamp, text = split(raw.decode(errors="replace"))
                    if not skip.fresh(stamp):
                        continue  # already forwarded before a reconnect
                    if budget[0] <= 0:
                        return True
                    budget[0] -= 1
                    self.log.info("[%s] %s", pod, text)
                    cursor.sent(stamp)
                    breaks.in_a_row.pop(pod, None)
                    if budget[0] == 0:
                        self.log.info("[logs] forwarded %d log lines; not forwarding more", self.forwarding.max_log_lines)
                        return True
        except Exception as exc:  # noqa: BLE001 - unreachable, refused, broken: said once; the next change of the job retries
            breaks.in_a_row[pod] = breaks.in_a_row.get(pod, 0) + 1
            said = self.log.debug if pod in breaks.said else self.log.warning
            breaks.said.add(pod)
            said("%s the log of %s stopped: %s: %s; %s", "following" if follow else "reading", pod, type(exc).__name__,
                 getattr(exc, "message", None) or exc,
                 "it is followed again from its last line sent" if follow else "its last lines are not forwarded")  # fmt: skip
            return False
        return True


@dataclass
class Breaks:
    """The replicas' logs whose reading ended on an error: said once each (at warning level), and
    how many times in a row (a line read again resets it), which sets the pause before the next
    try (``pause``)."""

    said: set[str] = field(default_factory=set)
    in_a_row: dict[str, int] = field(default_factory=dict)
    retry_at: dict[str, float] = field(default_factory=dict)  # pod -> the loop's time it may start again

    def pause(self, pod: str) -> float:
        """Seconds before the log of ``pod`` is followed again: none after its first error (the
        job's next change, or ``RESTART_AFTER`` without one), then doubling from ``RESTART_AFTER``."""
        errors = self.in_a_row.get(pod, 0)
        return 0.0 if errors <= 1 else min(RESTART_AFTER * 2 ** (errors - 2), RESTART_AT_MOST)


def _ended_on_error(task: asyncio.Task[bool]) -> bool:
    """Whether a follower's task ended on an error (not cancelled, not at the log's end)."""
    return not task.cancelled() and (task.exception() is not None or task.result() is False)


def _running_replicas(job: Obj | None) -> list[tuple[str, str]]:
    """(pod name, pod uid) of every replica the job's status reports Running."""
    return [(str(replica["name"]), str(replica.get("uid") or ""))
            for task in ((job or {}).get("status") or {}).get("tasks") or []
            for replica in task.get("status") or [] if replica.get("phase") == "Running" and replica.get("name")]  # fmt: skip


def _event_order(ev: Obj) -> tuple[str, int]:
    """Timestamps have one-second resolution; the resourceVersion orders within a second."""
    try:
        rv = int(ev["metadata"].get("resourceVersion") or 0)
    except ValueError:
        rv = 0
    return (str(ev.get("lastTimestamp") or ev.get("eventTime") or ""), rv)
