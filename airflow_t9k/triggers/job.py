"""``T9kJobTrigger``: wait, by watching, until a T9k job ends; then yield exactly one event.

While it waits it forwards the job's Kubernetes Events (and its pods') into the task log,
deduplicated and bounded. On completion the event carries the tail of every failed
replica's log. A user's kill of the deferred task (Airflow 3.3 ``on_kill``) deletes or
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
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_t9k.api import queueing
from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.paths import job_path
from airflow_t9k.api.resources import resource_for
from airflow_t9k.api.startup import (  # noqa: F401 - startup_remaining/startup_failure: their old home
    DEFAULT_STARTUP_ERROR_GRACE,
    StartupErrors,
    startup_failure,
    startup_remaining,
)
from airflow_t9k.hooks.t9k import AsyncT9kHook
from airflow_t9k.k8s.aio import within
from airflow_t9k.k8s.errors import ApiError, is_permanent
from airflow_t9k.triggers import shared_watch
from airflow_t9k.triggers.forward import ForwardMixin
from airflow_t9k.triggers.lookup import LookupFailed, wait_for_match
from airflow_t9k.triggers.outcome import LAST_READ, OutcomeMixin

Obj = dict[str, Any]
RECHECK = 2.0  # seconds between GETs while the watch has not (yet) seen a job that exists
BACKSTOP = 5.0  # seconds past the deadline at which any state is cut short


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class T9kJobTrigger(OutcomeMixin, ForwardMixin, BaseTrigger):
    """
    :param kind: job kind, e.g. ``PyTorchTrainingJob``
    :param name: job name
    :param namespace: job namespace
    :param uid: the job's uid; a different object of the same name is reported as an error
    :param kubernetes_conn_id: the ``kubernetes`` connection
    :param deadline: ISO time at which to give up with a ``timeout`` event (``timeout`` and
        ``execution_timeout`` of the task, carried into the triggerer)
    :param log_events: forward Kubernetes Events of the job and its pods into the task log
    :param max_forwarded: at most this many forwarded Events
    :param stream_logs: follow the running replicas' logs into the task log
    :param max_log_lines: at most this many forwarded log lines (all replicas together)
    :param max_followed_pods: follow at most this many replicas' logs at once
    :param log_tail_lines: lines of each failed replica's log to attach on completion
    :param on_kill_action: ``delete`` or ``pause`` the job when a user kills the task, or
        ``keep`` it, or ``none`` (the sensor: the job is not its own); never once this trigger
        has yielded its event
    :param events_since: ISO time; Events older than this are not forwarded
    :param config_file: kubeconfig path, read by the triggerer (it must be readable there)
    :param startup_timeout: seconds from the job's creation within which it must leave
        ``Pending``; else a ``timeout`` event naming the scheduler's reason
    :param startup_error_grace: seconds a replica of a job that has not started may show a
        waiting reason that waiting does not fix (``ErrImagePull``, ``ImagePullBackOff``,
        ``InvalidImageName``, ``CreateContainerConfigError``) before a ``startup_error`` event;
        None: never (then only ``startup_timeout`` ends such a wait)
    :param queue_timeout: seconds a job may wait in its Kueue queue (from its creation, or
        its eviction) before a ``timeout`` event; the task log says what the queue reports
    :param target_phases: also end the wait (``success``) when the job reaches one of these
        phases (the sensor's targets); terminal phases always end it
    :param follow_pods: follow only these replicas' logs (the operator's ``log_replicas=
        "deciding"``); None: every running replica, up to ``max_followed_pods``
    :param wait_for_creation: a job that does not exist (yet) is waited for, not an error (the
        sensor's trigger, deferred before the job was submitted)
    :param label_selector: instead of ``name``: the one job with these labels, waited for
    :param config_dict: accepted from triggers stored by earlier versions only; it holds
        credentials, so nothing passes it any more
    :param connection_extras: likewise (the triggerer reads the connection itself)
    """

    def __init__(
        self,
        *,
        kind: str,
        name: str = "",
        namespace: str,
        uid: str | None = None,
        kubernetes_conn_id: str | None = "kubernetes_default",
        cluster_context: str | None = None,
        config_dict: dict | None = None,
        in_cluster: bool | None = None,
        connection_extras: dict | None = None,
        deadline: str | None = None,
        log_events: bool = True,
        max_forwarded: int = 200,
        log_tail_lines: int = 50,
        on_kill_action: str = "delete",
        events_since: str | None = None,
        stream_logs: bool = True,
        max_log_lines: int = 1000,
        max_followed_pods: int = 8,
        config_file: str | None = None,
        startup_timeout: float | None = None,
        target_phases: list[str] | tuple[str, ...] | None = None,
        queue_timeout: float | None = None,
        startup_error_grace: float | None = DEFAULT_STARTUP_ERROR_GRACE,
        wait_for_creation: bool = False,
        label_selector: str | None = None,
        follow_pods: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_dict = config_dict
        self.in_cluster = in_cluster
        self.connection_extras = connection_extras
        self.deadline = deadline
        self.log_events = log_events
        self.max_forwarded = max_forwarded
        self.log_tail_lines = log_tail_lines
        self.on_kill_action = on_kill_action
        self.events_since = events_since
        self.stream_logs = stream_logs
        self.max_log_lines = max_log_lines
        self.max_followed_pods = max_followed_pods
        self.config_file = config_file
        self.startup_timeout = startup_timeout
        self.target_phases = list(target_phases) if target_phases else None
        self.queue_timeout = queue_timeout
        self.startup_error_grace = startup_error_grace
        self.wait_for_creation = wait_for_creation
        self.label_selector = label_selector
        self.follow_pods = list(follow_pods) if follow_pods is not None else None
        self._last_job: Obj | None = None
        self._last_failure: str = ""
        self._fired = False

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kind": self.kind,
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "config_file": self.config_file,
                "cluster_context": self.cluster_context,
                "in_cluster": self.in_cluster,
                **({"config_dict": self.config_dict} if self.config_dict else {}),
                **({"connection_extras": self.connection_extras} if self.connection_extras else {}),
                "deadline": self.deadline,
                "log_events": self.log_events,
                "max_forwarded": self.max_forwarded,
                "log_tail_lines": self.log_tail_lines,
                "on_kill_action": self.on_kill_action,
                "events_since": self.events_since,
                "stream_logs": self.stream_logs,
                "max_log_lines": self.max_log_lines,
                "max_followed_pods": self.max_followed_pods,
                "startup_timeout": self.startup_timeout,
                "target_phases": self.target_phases,
                **({"queue_timeout": self.queue_timeout} if self.queue_timeout else {}),
                **({"startup_error_grace": self.startup_error_grace}
                   if self.startup_error_grace != DEFAULT_STARTUP_ERROR_GRACE else {}),
                **({"wait_for_creation": True} if self.wait_for_creation else {}),
                **({"label_selector": self.label_selector} if self.label_selector else {}),
                **({"follow_pods": self.follow_pods} if self.follow_pods is not None else {}),
            },
        )

    # -- connections ---------------------------------------------------------------------
    def make_hook(self) -> AsyncT9kHook:
        return AsyncT9kHook(
            kubernetes_conn_id=self.kubernetes_conn_id,
            config_file=self.config_file,
            cluster_context=self.cluster_context,
            config_dict=self.config_dict,
            in_cluster=self.in_cluster,
            connection_extras=self.connection_extras,
        )

    def _watch_key(self) -> tuple[Any, ...]:
        config = repr(sorted((self.config_dict or {}).items())) if self.config_dict else None
        extras = repr(sorted((self.connection_extras or {}).items())) if self.connection_extras else None
        return (self.kubernetes_conn_id, self.config_file, self.cluster_context, self.in_cluster, config, extras)

    # -- run -----------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        # Everything is released before the one event is yielded: a runner that stops
        # iterating after the first event (as `airflow dags test` does) leaks nothing.
        event = await self._bounded()
        # From here on the job's end (or the timeout) is the task's to handle: a kill arriving
        # now (Mark success, Clear) must not delete or pause a job that has already ended.
        self._fired = True
        yield event

    async def _bounded(self) -> TriggerEvent:
        """The wait, cut short a little after the deadline whatever state it is in."""
        deadline = _parse_time(self.deadline)
        try:
            if deadline is None:
                return await self._watch_until_done()
            # Room for the last read too, so the backstop does not cut it short.
            return await within(self._watch_until_done(), max(deadline - time.time(), 0) + BACKSTOP + 2 * LAST_READ)
        except asyncio.TimeoutError:
            return await self._at_deadline()
        except Exception as exc:  # whatever it is, the task must hear of it rather than wait forever
            self.log.exception("waiting for %s %s/%s failed", self.kind, self.namespace, self.name)
            return self._event("error", self._last_job, f"waiting for {self.kind} {self.namespace}/{self.name} failed: {exc}")

    async def _watch_until_done(self) -> TriggerEvent:
        path = job_path(resource_for(self.kind), self.namespace)
        try:
            watch = await shared_watch.acquire(self._watch_key(), self.make_hook, path, self.kind)
        except Exception as exc:  # bad kubeconfig, missing connection, unreadable file
            who = AsyncT9kHook.identity(self.make_hook())
            return self._event("error", None, f"cannot load the Kubernetes configuration of {who}: {exc}")
        if not self.name:  # a sensor given labels: first the one job they name
            try:
                self.name = await wait_for_match(watch, self.namespace, self.label_selector or "")
            except (LookupFailed, ValueError) as exc:
                await shared_watch.release(watch)
                return self._event("error", None, str(exc))
            except BaseException:
                await shared_watch.release(watch)
                raise
        changed = watch.subscribe(self.name)
        helpers = []
        if self.log_events:
            helpers.append(asyncio.create_task(self._forward_events()))
        if self.stream_logs:
            helpers.append(asyncio.create_task(self._follow_logs(watch)))
        try:
            event = await self._wait(watch, changed)
            if helpers and event.payload["status"] != "error":
                await asyncio.sleep(0.5)  # let the last Events and log lines reach the log
            return event
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            watch.unsubscribe(self.name, changed)
            await shared_watch.release(watch)

    async def _wait(self, watch: shared_watch.SharedWatch, changed: asyncio.Event) -> TriggerEvent:
        deadline = _parse_time(self.deadline)
        last_phase = None
        last_note = None
        errors = StartupErrors(self.startup_error_grace)
        while True:
            changed.clear()
            wake_in: float | None = None
            failure = watch.failure
            if failure is not None and is_permanent(failure):
                return self._event("error", self._last_job, str(getattr(failure, "message", failure)))
            self._note_failure(failure)
            job = watch.get(self.namespace, self.name) if watch.is_synced() else None
            if watch.is_synced() and job is None and self.wait_for_creation:
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
                if state.terminal:
                    logs = await self._tails(state.failed_replicas)
                    return self._event("success" if state.succeeded else "failed", job, state.summary(), logs)
                if self.target_phases and state.phase in self.target_phases:
                    return self._event("success", job, state.summary())
                startup_left = startup_remaining(job, self.startup_timeout)
                if startup_left is not None and startup_left <= 0:
                    return await self._startup_timeout(watch, job)
                if startup_left is not None:
                    wake_in = startup_left if wake_in is None else min(wake_in, startup_left)
                due, next_in = errors.observe(job, time.time())
                if due:
                    return await self._startup_error(watch, job, due)
                if next_in is not None:
                    wake_in = next_in if wake_in is None else min(wake_in, next_in)
                line = queueing.note(job)
                if line and line != last_note:
                    self.log.info("%s %s/%s: %s", self.kind, self.namespace, self.name, line)
                last_note = line
                queue_left = queueing.queue_remaining(job, self.queue_timeout, time.time())
                if queue_left is not None and queue_left <= 0:
                    return self._event("timeout", job, queueing.queue_failure(self.kind, self.namespace, self.name, job,
                                                                              self.queue_timeout))  # fmt: skip
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
            self.log.warning("%s; retrying until the deadline (%s)", text, self.deadline or "none")
        self._last_failure = text
