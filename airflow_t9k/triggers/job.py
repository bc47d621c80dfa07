"""``T9kJobTrigger``: wait, by watching, until a T9k job ends; then yield exactly one event.

While it waits it forwards the job's Kubernetes Events (and its pods') and the followed
replicas' logs into the task log, deduplicated and bounded. When the job failed it prints the
failed replicas' logs there too, the first to fail first, and its event names that replica as
the root cause, with its last lines. A user's kill of the deferred task (Airflow 3.3 ``on_kill``) deletes or
pauses the job.

The deadline holds in every state (loading credentials, the first LIST, waiting, reading
logs): Airflow does not enforce ``execution_timeout`` while a task is deferred. An error
waiting cannot fix (the CRD is not installed, 401, 403) ends the wait at once with what to
do; one that may pass (no answer, 429, 5xx) is retried by the watch until the deadline.

The stored arguments carry no credentials: the triggerer resolves them itself from the
connection id, the kubeconfig path, the context or in-cluster.

Split by concern: the wait (here), what it forwards into the task log (``forward``), how it
ends (``outcome``), and finding a job by labels (``lookup``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk.configuration import conf
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_t9k.api import queueing
from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.overrun import PREDICTED_OVERRUN
from airflow_t9k.api.overrun import note as overrun_note
from airflow_t9k.api.paths import job_path
from airflow_t9k.api.progress import note as progress_note
from airflow_t9k.api.resources import resource_for
from airflow_t9k.api.stall import note as stall_note
from airflow_t9k.api.startup import (  # noqa: F401 - startup_remaining/startup_failure: their old home
    DEFAULT_STARTUP_ERROR_GRACE,
    StartupErrors,
    startup_failure,
    startup_remaining,
)
from airflow_t9k.k8s.aio import within
from airflow_t9k.k8s.errors import ApiError, is_permanent
from airflow_t9k.triggers import records, shared_watch
from airflow_t9k.triggers.forward import ENDING_REASONS, ForwardMixin
from airflow_t9k.triggers.lookup import LookupFailed, chosen, matcher, wait_for_match
from airflow_t9k.triggers.outcome import CREDENTIALS_WITHIN, LAST_READ, OutcomeMixin

if TYPE_CHECKING:
    from airflow_t9k.api.logcursor import Cursor
    from airflow_t9k.hooks.t9k import AsyncT9kHook
    from airflow_t9k.triggers.records import Connection, Forwarding, JobRef, WaitPolicy

Obj = dict[str, Any]
log = logging.getLogger(__name__)
RECHECK = 2.0  # seconds between GETs while the watch has not (yet) seen a job that exists
BACKSTOP = 5.0  # seconds past the deadline at which any state is cut short


HOLD = 10.0  # [t9k] deferral_hold_seconds: past the 5 s the deferring process's exit came late


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def hold_left(deferred_at: str | None, hold: float, now: float) -> float:
    """Seconds to hold an event until ``hold`` seconds after the deferral (0: none)."""
    try:
        start = _parse_time(deferred_at)
    except ValueError:
        return 0.0
    if start is None or hold <= 0:
        return 0.0
    return max(0.0, min(start + hold - now, hold))


class T9kJobTrigger(OutcomeMixin, ForwardMixin, BaseTrigger):
    """
    Its arguments come in four records (``airflow_t9k.triggers.records``), each stored as a
    plain dict; the flat keyword arguments of earlier versions (``kind=``, ``deadline=``,
    ``max_log_lines=``...) are still accepted, so a trigger stored before an upgrade still runs.

    :param job: which job (``JobRef``: kind, namespace, name, uid, label_selector); a different
        object under the name is reported as an error; with ``label_selector`` instead of a name,
        the one job with these labels, waited for
    :param connection: where the triggerer finds the cluster (``Connection``: connection id,
        kubeconfig path, context, in-cluster); no credentials, the triggerer reads them itself
    :param policy: how to wait (``WaitPolicy``): the ``deadline`` (ISO time, carried from the
        task's ``timeout`` and ``execution_timeout``; past it the job is read once, bounded,
        before a ``timeout`` event), ``startup_timeout``, ``startup_error_grace``,
        ``queue_timeout``, ``target_phases`` (the sensor's), ``wait_for_creation`` (the
        sensor's: a job that does not exist yet is waited for), and ``on_kill_action``
        (``delete``, ``pause``, ``keep``, or ``none`` for the sensor; never once this trigger
        has yielded its event)
    :param forwarding: what reaches the task log (``Forwarding``): Events (``log_events``,
        ``max_forwarded``, ``events_since``), followed replica logs (``stream_logs``,
        ``max_log_lines``, ``max_followed_pods``, ``follow_pods``), and, when the job failed,
        the failed replicas' logs, first failed first (within ``max_log_lines`` and
        ``max_followed_pods`` again), the first one's last ``log_tail_lines`` in the event
    :param config_dict: accepted from triggers stored by earlier versions only; it holds
        credentials, so nothing passes it any more
    :param connection_extras: likewise (the triggerer reads the connection itself)
    """

    def __init__(
        self,
        *,
        job: JobRef | Obj | None = None,
        connection: Connection | Obj | None = None,
        policy: WaitPolicy | Obj | None = None,
        forwarding: Forwarding | Obj | None = None,
        **flat: Any,  # the flat shape of earlier versions (and of config_dict/connection_extras)
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger.__init__, unannotated
        self.job, self.connection, self.policy, self.forwarding, self._legacy, self._notes = records.from_kwargs(
            {"job": job, "connection": connection, "policy": policy, "forwarding": forwarding, **flat}
        )
        records.warn(self._notes, log)  # the triggerer's own log; the task log hears it when the trigger runs
        self._last_job: Obj | None = None
        self._last_failure: str = ""
        self._streamed: dict[str, Cursor] = {}  # pod -> where its forwarded log lines stand
        self._log_ending: Obj | None = None
        self._log_wake: asyncio.Event | None = None
        self._log_task: asyncio.Task[None] | None = None
        self._fired = False

    # The job's identity, read everywhere (and ``name`` learnt from a label selector's match).
    @property
    def kind(self) -> str:
        return self.job.kind

    @property
    def namespace(self) -> str:
        return self.job.namespace

    @property
    def uid(self) -> str | None:
        return self.job.uid

    @property
    def name(self) -> str:
        return self.job.name

    @name.setter
    def name(self, value: str) -> None:
        self.job.name = value

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                records.VERSION_KEY: records.VERSION,
                "job": records.to_dict(self.job),
                "connection": records.to_dict(self.connection),
                "policy": records.to_dict(self.policy),
                "forwarding": records.to_dict(self.forwarding),
                **self._legacy,  # only a trigger loaded from an old row has any
            },
        )

    # -- connections ---------------------------------------------------------------------
    def make_hook(self) -> AsyncT9kHook:
        from airflow_t9k.hooks.t9k import AsyncT9kHook  # here, not at the top: see hooks/__init__.py

        c = self.connection
        return AsyncT9kHook(
            kubernetes_conn_id=c.kubernetes_conn_id,
            config_file=c.config_file,
            cluster_context=c.cluster_context,
            in_cluster=c.in_cluster,
            config_dict=self._legacy.get("config_dict"),
            connection_extras=self._legacy.get("connection_extras"),
        )

    def _watch_key(self) -> tuple[Any, ...]:
        legacy = tuple(repr(sorted((self._legacy.get(k) or {}).items())) if self._legacy.get(k) else None
                       for k in records.LEGACY_CREDENTIALS)  # fmt: skip
        c = self.connection
        return (c.kubernetes_conn_id, c.config_file, c.cluster_context, c.in_cluster, *legacy)

    # -- run -----------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        # Everything is released before the one event is yielded: a runner that stops
        # iterating after the first event (as `airflow dags test` does) leaks nothing.
        event = await self._bounded()
        # From here on the job's end (or the timeout) is the task's to handle: a kill arriving
        # now (Mark success, Clear) must not delete or pause a job that has already ended.
        self._fired = True
        await self._hold()
        yield event

    async def _hold(self) -> None:
        """Hold the event until ``[t9k] deferral_hold_seconds`` after the task deferred: Airflow
        3.3's scheduler can fail a try resumed before it read the deferring process's exit
        (apache/airflow#72716; that exit came up to 5 s late in the end-to-end tests). Only a job
        that ends within that window waits; a retry would deliver it anyway (api/rerun.py)."""
        hold = conf.getfloat("t9k", "deferral_hold_seconds", fallback=HOLD)
        left = hold_left(self.forwarding.events_since, hold, time.time())
        if left > 0:
            self.log.info("the event came within %gs of the deferral ([t9k] deferral_hold_seconds): holding it %.1fs more, "
                          "past Airflow's stale defer-exit race (apache/airflow#72716)", hold, left)  # fmt: skip
            await asyncio.sleep(left)

    async def _bounded(self) -> TriggerEvent:
        """The wait, cut short a little after the deadline whatever state it is in."""
        records.warn(self._notes, self.log)
        deadline = _parse_time(self.policy.deadline)
        try:
            if deadline is None:
                return await self._watch_until_done()
            # Room for the last read too (its credentials, the job, its log tails), so the backstop does not cut it short.
            last_read = CREDENTIALS_WITHIN + 2 * LAST_READ
            return await within(self._watch_until_done(), max(deadline - time.time(), 0) + BACKSTOP + last_read)
        except asyncio.TimeoutError:
            return await self._at_deadline()
        except Exception as exc:  # whatever it is, the task must hear of it rather than wait forever
            self.log.exception("waiting for %s %s/%s failed", self.kind, self.namespace, self.name)
            return self._event("error", self._last_job, f"waiting for {self.kind} {self.namespace}/{self.name} failed: {exc}")

    async def _watch_until_done(self) -> TriggerEvent:
        path = job_path(resource_for(self.kind), self.namespace)
        try:
            watch = await shared_watch.acquire(self._watch_key(), self.make_hook, path, self.kind)
        except Exception as exc:  # noqa: BLE001 - bad kubeconfig, missing connection, unreadable file
            from airflow_t9k.hooks.t9k import AsyncT9kHook, config_fix

            who = AsyncT9kHook.identity(self.make_hook())
            return self._event("error", None, f"cannot load the Kubernetes configuration of {who}: {exc}; {config_fix(exc)}")
        if not self.name:  # a sensor given labels: first the one job they name
            try:
                self.name = await wait_for_match(watch, self.namespace, self.job.label_selector or "")
            except (LookupFailed, ValueError) as exc:
                await shared_watch.release(watch)
                return self._event("error", None, str(exc))
            except BaseException:
                await shared_watch.release(watch)
                raise
        changed = watch.subscribe(self.name)
        helpers = []
        if self.job.label_selector:  # a newer try's job of the followed task wakes the wait, which follows it
            helpers.append(asyncio.create_task(self._wake_on_matches(watch, changed)))
        if self.forwarding.log_events:
            self._events_settled = asyncio.Event()  # one per wait: an Event belongs to the loop that waits on it
            helpers.append(asyncio.create_task(self._forward_events()))
        if self.forwarding.stream_logs:
            self._log_task = asyncio.create_task(self._follow_logs(watch))
            helpers.append(self._log_task)
        try:
            event = await self._wait(watch, changed)
            if helpers and event.payload["status"] != "error":
                await self._let_the_log_catch_up(event.payload)
            return event
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            watch.unsubscribe(self.name, changed)
            await shared_watch.release(watch)

    async def _let_the_log_catch_up(self, payload: Obj) -> None:
        """Half a second for the last log lines; for an ended job, its ending Event too (it is
        written after the status this wait saw: ``forward.END_EVENT_WAIT``)."""
        waits = [asyncio.sleep(0.5)]
        if self.forwarding.log_events and payload.get("phase") in ENDING_REASONS:
            waits.append(self.ending_event_forwarded())
        await asyncio.gather(*waits)

    async def _wake_on_matches(self, watch: shared_watch.SharedWatch, changed: asyncio.Event) -> None:
        arriving = watch.subscribe_matching(matcher(self.namespace, self.job.label_selector or ""))
        try:
            while True:
                await arriving.get()
                changed.set()
        finally:
            watch.unsubscribe_matching(arriving)

    def _follow_newest(self, watch: shared_watch.SharedWatch, changed: asyncio.Event) -> str | None:
        """A sensor given labels follows the newest try's job of the task they name: a retry's
        job that appeared since is followed from now on. An error message when the matches are
        ambiguous, or when the job followed is gone and nothing matches any more."""
        try:
            found = chosen(watch, matcher(self.namespace, self.job.label_selector or ""), self.job.label_selector or "")
        except LookupFailed as exc:
            return str(exc)
        if found is None:
            return None if self._last_job is None else f"{self.kind} {self.namespace}/{self.name} was deleted after it was seen"
        name = str(found["metadata"]["name"])
        if name != self.name:
            self.log.info("following %s %s/%s, the newest try's job matching %r, instead of %s", self.kind, self.namespace,
                          name, self.job.label_selector, self.name)  # fmt: skip
            watch.unsubscribe(self.name, changed)
            self.name = name
            watch.subscribe(name, changed)
            self._last_job = None
        return None

    async def _wait(self, watch: shared_watch.SharedWatch, changed: asyncio.Event) -> TriggerEvent:
        deadline = _parse_time(self.policy.deadline)
        last_phase = None
        last_note = None
        last_progress = None
        last_stall = None
        last_overrun = self.policy.overrun_seen  # said already by the worker, or by the trigger before a resume
        errors = StartupErrors(self.policy.startup_error_grace)
        while True:
            changed.clear()
            wake_in: float | None = None
            failure = watch.failure
            if failure is not None and is_permanent(failure):
                return self._event("error", self._last_job, str(getattr(failure, "message", failure)))
            self._note_failure(failure)
            if self.job.label_selector and watch.is_synced() and (why := self._follow_newest(watch, changed)):
                return self._event("error", self._last_job, why)
            job = watch.get(self.namespace, self.name) if watch.is_synced() else None
            if watch.is_synced() and job is None and self.policy.wait_for_creation and self._last_job is not None:
                # Seen, now gone: a sensor would otherwise wait out its timeout for a job that will not come back.
                try:
                    job = await watch.hook.get_job(self.kind, self.name, self.namespace)
                    if job is None:
                        return self._event("error", self._last_job, f"{self.kind} {self.namespace}/{self.name} was deleted "
                                           "after it was seen")  # fmt: skip
                except ApiError as exc:
                    if is_permanent(exc):
                        return self._event("error", self._last_job, exc.message)
                    self._note_failure(exc)
                wake_in = RECHECK  # the watch has not caught up with what the GET saw, or the GET failed
            elif watch.is_synced() and job is None and self.policy.wait_for_creation:
                pass  # the sensor waits for the job to appear: its creation wakes this wait
            elif watch.is_synced() and job is None:
                # A watch that has not seen a new job yet is not proof that it is gone.
                try:
                    job = await watch.hook.get_job(self.kind, self.name, self.namespace)
                    if job is None:
                        return self._event("error", None, f"{self.kind} {self.namespace}/{self.name} was deleted while waiting")
                except ApiError as exc:
                    if is_permanent(exc):
                        return self._event("error", self._last_job, exc.message)
                    self._note_failure(exc)
                wake_in = RECHECK
            elif not watch.is_synced():
                wake_in = 0.5  # the first LIST has not succeeded yet
            if job is not None:
                if self.uid and job["metadata"].get("uid") != self.uid:
                    return self._event("error", job, f"{self.kind} {self.namespace}/{self.name} was replaced by another object")
                self._last_job = job
                state = interpret(job)
                if state.phase != last_phase:
                    self.log.info("%s %s/%s: %s", self.kind, self.namespace, self.name, state.summary())
                    last_phase = state.phase
                if state.phase == "Running":
                    await self._running_seen()  # forwarding.running_xcom, once (outcome.py)
                if state.terminal:
                    await self.logs_drained(job)  # the last lines first: the failed-logs report skips them
                    failed = await self._failed_logs(job) if not state.succeeded else {}
                    return self._event("success" if state.succeeded else "failed", job, state.summary(), failed)
                if self.policy.target_phases and state.phase in self.policy.target_phases:
                    return self._event("success", job, state.summary())
                startup_left = startup_remaining(job, self.policy.startup_timeout)
                if startup_left is not None and startup_left <= 0:
                    return await self._startup_timeout(watch, job)
                if startup_left is not None:
                    wake_in = startup_left if wake_in is None else min(wake_in, startup_left)
                due, next_in = errors.observe(job, time.time())
                if due:
                    return await self._startup_error(watch, job, due)
                if next_in is not None:
                    wake_in = next_in if wake_in is None else min(wake_in, next_in)
                progress = progress_note(job)
                if progress is not None and progress[0] != last_progress:  # each write of status.progress once
                    self.log.info("%s %s/%s: progress %s", self.kind, self.namespace, self.name, progress[1])
                    last_progress = progress[0]
                line = queueing.note(job)
                if line and line != last_note:
                    self.log.info("%s %s/%s: %s", self.kind, self.namespace, self.name, line)
                last_note = line
                stall = stall_note(job)  # hang detection: each change of the job's Stalled condition once
                if stall is not None and stall[0] != last_stall:
                    (self.log.warning if stall[2] else self.log.info)("%s %s/%s: %s", self.kind, self.namespace,
                                                                      self.name, stall[1])  # fmt: skip
                    last_stall = stall[0]
                over = overrun_note(job)  # the ETA past the try's deadline (api/overrun.py): each turn once
                if over is not None and over[0] != last_overrun:
                    last_overrun = over[0]
                    if over[2] and self.policy.overrun_callback:  # the task's callback runs on a worker, once
                        # The worker says it: Airflow starts the trigger log anew at the next deferral.
                        extra = {"deadline": self.policy.deadline, "overrun_key": over[0]}
                        return self._event(PREDICTED_OVERRUN, job, over[1], extra)
                    (self.log.warning if over[2] else self.log.info)("%s %s/%s: %s", self.kind, self.namespace,
                                                                     self.name, over[1])  # fmt: skip
                queue_left = queueing.queue_remaining(job, self.policy.queue_timeout, time.time())
                if queue_left is not None and queue_left <= 0:
                    return self._event("timeout", job, queueing.queue_failure(self.kind, self.namespace, self.name, job,
                                                                              self.policy.queue_timeout))  # fmt: skip
                if queue_left is not None:
                    wake_in = queue_left if wake_in is None else min(wake_in, queue_left)
            remaining = None if deadline is None else deadline - time.time()
            if remaining is not None and remaining <= 0:
                return await self._at_deadline()
            timeout = remaining if wake_in is None else (wake_in if remaining is None else min(wake_in, remaining))
            try:
                await within(changed.wait(), timeout)
            except asyncio.TimeoutError:
                continue

    def _note_failure(self, failure: BaseException | None) -> None:
        """Log each new failure once; the timeout message repeats the last one."""
        text = "" if failure is None else str(getattr(failure, "message", failure))
        if text and text != self._last_failure:
            self.log.warning("%s; retrying until the deadline (%s)", text, self.policy.deadline or "none")
        self._last_failure = text
