"""Waiting: the deadline, the trigger that waits in the triggerer, and the worker-side wait
(one watch of the job, resumed when it ends; an API server that stops answering is waited
out with back-off until the deadline, as the trigger does)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.paths import job_path
from airflow_t9k.api.progress import note as progress_note
from airflow_t9k.api.queueing import note as queue_note
from airflow_t9k.api.queueing import queue_failure, queue_remaining
from airflow_t9k.api.resources import resource_for
from airflow_t9k.api.stall import note as stall_note
from airflow_t9k.api.startup import StartupErrors, startup_error, startup_failure, startup_remaining, waiting_detail
from airflow_t9k.k8s.errors import ApiError, is_transient
from airflow_t9k.operators.logs import LogFollower, print_failed_logs
from airflow_t9k.triggers.job import T9kJobTrigger
from airflow_t9k.triggers.records import Connection, Forwarding, JobRef, WaitPolicy

Obj = dict[str, Any]


# Where the worker-side wait left the followed logs, for the next try (the task state store).
WORKER_CURSOR_KEY = "t9k_worker_log_cursor"


class WaitMixin:
    """Part of ``T9kJobOperator``: waiting for its job, deferred or on the worker."""

    hook: Any
    log: Any
    execution_timeout: Any
    _identity: Obj | None
    # Set by T9kJobOperator.__init__ (operators/job.py).
    timeout: float | None
    kubernetes_conn_id: str | None
    config_file: str | None
    cluster_context: str | None
    in_cluster: bool | None
    startup_timeout: float | None
    startup_error_grace: float | None
    queue_timeout: float | None
    on_kill_action: str
    log_events: bool
    stream_logs: bool
    max_log_lines: int
    max_followed_pods: int
    _follow_pods: list[str] | None
    log_tail_lines: int
    do_xcom_push: bool  # BaseOperator's
    on_predicted_overrun: Any  # operators/overrun.py
    _overrun_called: bool
    _overrun_note: str | None
    _overrun_seen: Any

    def _deadline(self, context: Any) -> float | None:
        candidates = []
        if self.timeout is not None:
            candidates.append(time.time() + float(self.timeout))
        start = getattr(context.get("ti"), "start_date", None)
        if self.execution_timeout is not None and isinstance(start, datetime):
            candidates.append(start.timestamp() + self.execution_timeout.total_seconds())
        return min(candidates) if candidates else None

    def _trigger(self, identity: Obj, deadline: float | None, overrun_callback: bool | None = None) -> T9kJobTrigger:
        """The trigger that waits for our job; ``overrun_callback``: resume the task once when the
        job is predicted to miss its deadline (by default: when there is a callback not yet called)."""
        if overrun_callback is None:
            overrun_callback = self.on_predicted_overrun is not None and not self._overrun_called
        return T9kJobTrigger(
            job=JobRef(kind=identity["kind"], name=identity["name"], namespace=identity["namespace"], uid=identity["uid"]),
            # a kubeconfig path, not its content: the triggerer reads it, no credentials in the trigger
            connection=Connection(
                kubernetes_conn_id=self.kubernetes_conn_id,
                config_file=self.config_file,
                cluster_context=self.cluster_context,
                in_cluster=self.in_cluster,
            ),
            policy=WaitPolicy(
                deadline=datetime.fromtimestamp(deadline, timezone.utc).isoformat() if deadline else None,
                startup_timeout=self.startup_timeout,
                startup_error_grace=self.startup_error_grace,
                queue_timeout=self.queue_timeout,
                on_kill_action=self.on_kill_action,
                overrun_callback=overrun_callback,
                overrun_seen=self._overrun_note,
            ),
            forwarding=Forwarding(
                log_events=self.log_events,
                events_since=datetime.now(timezone.utc).isoformat(),
                stream_logs=self.stream_logs,
                max_log_lines=self.max_log_lines,
                max_followed_pods=self.max_followed_pods,
                follow_pods=tuple(self._follow_pods) if self._follow_pods is not None else None,
                log_tail_lines=self.log_tail_lines,
                save_log_cursor=self.do_xcom_push,
                running_xcom=self._running_xcom(),
            ),
        )

    def _running_xcom(self) -> tuple[str, str] | None:
        """An XCom the trigger writes when it first sees the job Running (TIJobOperator's ``ti_state``)."""
        return None

    def _phase_seen(self, phase: str | None) -> None:
        """The job's phase, each time it changes, as this worker sees it: before deferring, and in
        the worker-side wait (TIJobOperator pushes ``ti_state`` from it)."""

    _cursor_store: Any = None  # the task state store, set by execute

    def _wait_sync(self, identity: Obj, deadline: float | None) -> Obj:
        """Wait on this worker by watching the job (one watch, resumed when it ends).

        An API server that stops answering is waited out with back-off until the deadline,
        as the trigger does; a permanent error (CRD gone, access revoked) ends the wait.
        """
        self._startup_errors = StartupErrors(self.startup_error_grace)
        self._logs = (LogFollower(self.hook, identity["namespace"], self.log, self.max_log_lines, self.max_followed_pods,
                                  self._follow_pods, owner_uid=identity["uid"], tail_lines=self.log_tail_lines)
                      if self.stream_logs and self.max_log_lines else None)  # fmt: skip
        store = getattr(self, "_cursor_store", None)
        if self._logs is not None and store is not None:
            self._logs.resume_from(store.get(WORKER_CURSOR_KEY), identity["uid"])
        try:
            return self._wait_sync_loop(identity, deadline)
        finally:
            if self._logs is not None:
                self._logs.stop()
                self._save_cursors(identity)

    def _save_cursors(self, identity: Obj) -> None:
        """Where the followed logs stand, in the task state store when it moved: a retry after this
        try is lost (its worker killed) reads on from there (``LogFollower.resume_from``)."""
        store = getattr(self, "_cursor_store", None)
        if self._logs is None or store is None:
            return
        snapshot = self._logs.snapshot(identity["uid"])
        if snapshot["pods"] and snapshot != getattr(self, "_cursor_saved", None):
            try:
                store.set(WORKER_CURSOR_KEY, snapshot)
                self._cursor_saved = snapshot
            except Exception as exc:  # noqa: BLE001 - the log goes on; a retry would repeat lines
                self.log.debug("could not save where the logs stand: %s", exc)

    def _wait_sync_loop(self, identity: Obj, deadline: float | None) -> Obj:
        delay = 1.0
        last: list[str | None] = [None]
        while True:
            try:
                event = self._watch_step(identity, deadline, last)
                delay = 1.0
            except ApiError as exc:
                if not is_transient(exc):
                    raise
                if deadline is not None and time.time() + delay > deadline:
                    return self._event_from(
                        None, "timeout", f"timed out waiting for {identity['name']}; last error: {exc.message}"
                    )
                self.log.warning("%s; retrying in %.0fs", exc.message, delay)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            if event is not None:
                return event

    def _watch_step(self, identity: Obj, deadline: float | None, last: list[str | None]) -> Obj | None:
        """Read the job; return the final event if the wait is over, else watch until it changes."""
        from kubernetes import watch

        resource = resource_for(identity["kind"])
        job = self.hook.get_job(identity["kind"], identity["name"], identity["namespace"])
        if job is None or job["metadata"]["uid"] != identity["uid"]:
            return self._event_from(job, "error", f"{identity['kind']} {identity['name']} was deleted or replaced")
        if self._logs is not None:
            self._logs.update(job)
            self._save_cursors(identity)  # at most once a watch (60 s): a lost try repeats, never drops, lines
        state = interpret(job)
        if state.phase != last[0]:
            self.log.info("%s %s: %s", identity["kind"], identity["name"], state.summary())
            last[0] = state.phase
            self._phase_seen(state.phase)
        if state.terminal:
            return self._event_from(job, "success" if state.succeeded else "failed")
        remaining = None if deadline is None else deadline - time.time()
        if remaining is not None and remaining <= 0:
            return self._event_from(job, "timeout", f"timed out waiting for {identity['name']} ({state.summary()})")
        startup_left = startup_remaining(job, self.startup_timeout)
        if startup_left is not None and startup_left <= 0:
            reason = self.hook.pending_reason(identity["name"], identity["namespace"], identity["uid"])
            return self._event_from(job, "timeout", startup_failure(identity["kind"], identity["namespace"], identity["name"],
                                                                    self.startup_timeout, reason))  # fmt: skip
        if startup_left is not None:
            remaining = startup_left if remaining is None else min(remaining, startup_left)
        due, next_in = self._startup_errors.observe(job, time.time())
        if due:
            detail = waiting_detail(self.hook.list_replica_pods(identity["name"], identity["namespace"], identity["uid"]), due)
            message = startup_error(
                identity["kind"], identity["namespace"], identity["name"], self.startup_error_grace, due, detail
            )
            return {**self._event_from(job, "startup_error", message), "waiting": due}
        if next_in is not None:
            remaining = next_in if remaining is None else min(remaining, next_in)
        progress = progress_note(job)
        if progress is not None and progress[0] != getattr(self, "_progress_note", None):  # each write once
            self.log.info("%s %s: progress %s", identity["kind"], identity["name"], progress[1])
            self._progress_note = progress[0]
        line = queue_note(job)
        if line and line != getattr(self, "_queue_note", None):
            self.log.info("%s %s: %s", identity["kind"], identity["name"], line)
        self._queue_note = line
        stall = stall_note(job)  # hang detection: each change of the job's Stalled condition once
        if stall is not None and stall[0] != getattr(self, "_stall_note", None):
            (self.log.warning if stall[2] else self.log.info)("%s %s: %s", identity["kind"], identity["name"], stall[1])
            self._stall_note = stall[0]
        self._overrun_seen(job)  # the ETA past the try's deadline: a warning, and the callback once
        queue_left = queue_remaining(job, self.queue_timeout, time.time())
        if queue_left is not None and queue_left <= 0:
            return self._event_from(job, "timeout", queue_failure(identity["kind"], identity["namespace"], identity["name"],
                                                                  job, self.queue_timeout))  # fmt: skip
        if queue_left is not None:
            remaining = queue_left if remaining is None else min(remaining, queue_left)
        w = watch.Watch()
        path = job_path(resource, identity["namespace"])
        with self.hook.boundary("WATCH", path):
            for _ in w.stream(
                self.hook.custom_object_client.list_namespaced_custom_object, resource.group, resource.version,
                identity["namespace"], resource.plural, field_selector=f"metadata.name={identity['name']}",
                resource_version=job["metadata"]["resourceVersion"], timeout_seconds=int(min(remaining or 60, 60)) or 1,
            ):  # fmt: skip
                w.stop()  # something changed: read it fresh on the next step
        return None

    def _event_from(self, job: Obj | None, status: str, message: str | None = None) -> Obj:
        state = interpret(job)
        failed: Obj = {}
        follower = getattr(self, "_logs", None)
        if job is not None and follower is not None and state.terminal and status in ("success", "failed"):
            # The replicas' last lines first (once); then nothing streamed interleaves with the failed logs.
            follower.finish(job)
        elif follower is not None and status == "failed":
            follower.stop()
        if job is not None and status == "failed":
            failed = print_failed_logs(self.hook, job, self.log, max_lines=self.max_log_lines, max_pods=self.max_followed_pods,
                                       tail_lines=self.log_tail_lines,
                                       streamed=follower.last_seen if follower else None)  # fmt: skip
        meta = (job or {}).get("metadata") or {}
        return {
            "status": status,
            "kind": (job or {}).get("kind") or (self._identity or {}).get("kind"),
            "name": meta.get("name") or (self._identity or {}).get("name"),
            "namespace": meta.get("namespace") or (self._identity or {}).get("namespace"),
            "uid": (self._identity or {}).get("uid") or meta.get("uid"),  # ours, not a replacement's
            "phase": state.phase,
            "message": message or state.summary(),
            "state": state.as_dict(),
            "logs": {},
            **failed,  # failed_first, the root cause's last lines (logs), logs_printed
        }
