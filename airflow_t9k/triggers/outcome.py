"""How the trigger's wait ends: the one event (the job's own uid, never the observed object's),
the last bounded read at the deadline, the startup failures, and what a user's kill does."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from airflow.sdk.configuration import conf
from airflow.triggers.base import TriggerEvent

from airflow_t9k.api.evidence import KeptLogs
from airflow_t9k.api.failed import FailedLogs, first_failed, print_lines, unavailable
from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.runmode import pause_patch
from airflow_t9k.api.startup import startup_error, startup_failure, waiting_detail
from airflow_t9k.k8s.aio import within
from airflow_t9k.k8s.errors import ApiError
from airflow_t9k.triggers import cursors

if TYPE_CHECKING:
    from airflow_t9k.api.logcursor import Cursor
    from airflow_t9k.triggers import shared_watch
    from airflow_t9k.triggers.records import Forwarding, JobRef, WaitPolicy

Obj = dict[str, Any]
# Seconds the one read of the job at the deadline may take (and its log tails as long).
LAST_READ = 15.0
# Seconds its credentials may take to load first: the connection is resolved through the
# triggerer's supervisor, which a restarted triggerer's first XCom reads kept busy for 19 s on a
# loaded machine (it builds its in-process API then). Counted apart from the read, so a triggerer
# slow to answer itself does not pass for a job never seen.
CREDENTIALS_WITHIN = 45.0


class OutcomeMixin:
    """Part of ``T9kJobTrigger``: its event, the deadline's last read, and the kill."""

    log: Any
    name: str
    job: JobRef
    policy: WaitPolicy
    if TYPE_CHECKING:  # read-only properties of T9kJobTrigger

        @property
        def kind(self) -> str: ...
        @property
        def namespace(self) -> str: ...
        @property
        def uid(self) -> str | None: ...

    forwarding: Forwarding
    make_hook: Any
    _note_failure: Any
    _last_job: Obj | None
    _last_failure: str
    _streamed: dict[str, Cursor]
    _fired: bool

    _running_written: bool = False

    async def _running_seen(self) -> None:
        """The job runs: ``forwarding.running_xcom`` into the task's XCom, once (TIJobOperator's
        ``ti_state``). Here rather than by an extra event: an event ends the deferral, and a resume
        and a new deferral would cost a worker slot and a trigger each. Awaited, so it is written
        before any end event the task then writes its final state from."""
        wanted = self.forwarding.running_xcom
        if self._running_written or not wanted or len(wanted) != 2:
            return
        self._running_written = True
        if not await cursors.put(self, str(wanted[0]), wanted[1]):
            self.log.info("could not write XCom %s=%s now the job runs (no task instance, or the API did not answer); "
                          "the task writes its final value at the end", wanted[0], wanted[1])  # fmt: skip

    async def _at_deadline(self) -> TriggerEvent:
        """The deadline has passed: read the job once, bounded, before saying ``timeout``.

        A trigger may start long after its deadline (a triggerer restart, an outage, a
        backlog) and the shared watch may not have delivered the job yet; the job may have
        ended meanwhile, and a ``timeout`` would make the task delete a finished job and a
        retry train again from scratch."""
        if not self.name:  # a selector that never matched: there is nothing to read
            return self._timeout_event()
        try:
            job = await self._read_job_once()
        except Exception as exc:  # noqa: BLE001 - the deadline stands; say why the job is unknown
            if not isinstance(exc, asyncio.TimeoutError):
                self._note_failure(exc)
            job = None
        if job is not None and (not self.uid or job["metadata"].get("uid") == self.uid):
            self._last_job = job
            state = interpret(job)
            if state.terminal:
                try:
                    failed = await within(self._failed_logs(job), LAST_READ) if not state.succeeded else {}
                except Exception:  # noqa: BLE001 - the outcome matters more than the logs
                    failed = {}
                return self._event("success" if state.succeeded else "failed", job, state.summary(), failed)
            if self.policy.target_phases and state.phase in self.policy.target_phases:
                return self._event("success", job, state.summary())
        return self._timeout_event()

    async def _read_job_once(self) -> Obj | None:
        hook = self.make_hook()
        try:
            try:
                await within(hook.kube(), CREDENTIALS_WITHIN)
            except asyncio.TimeoutError:
                self._last_failure = f"the triggerer's credentials for the cluster did not load within {CREDENTIALS_WITHIN:g}s"
                self.log.warning("%s %s/%s past its deadline: %s", self.kind, self.namespace, self.name, self._last_failure)
                raise
            return await within(hook.get_job(self.kind, self.name, self.namespace), LAST_READ)
        finally:
            await hook.close()

    def _timeout_event(self) -> TriggerEvent:
        state = interpret(self._last_job).summary() if self._last_job else "never seen"
        why = f"; last error: {self._last_failure}" if self._last_failure else ""
        what = self.name or f"a job matching {self.job.label_selector!r}"
        return self._event("timeout", self._last_job, f"timed out waiting for {self.kind} {what} ({state}){why}")

    async def _startup_timeout(self, watch: shared_watch.SharedWatch, job: Obj) -> TriggerEvent:
        try:
            reason = await watch.hook.pending_reason(self.name, self.namespace, self._owner_uid(job))
        except ApiError as exc:
            reason = f"(the reason could not be read: {exc.message})"
        return self._event(
            "timeout", job, startup_failure(self.kind, self.namespace, self.name, self.policy.startup_timeout, reason)
        )

    async def _startup_error(self, watch: shared_watch.SharedWatch, job: Obj, due: dict[str, str]) -> TriggerEvent:
        try:
            pods = await watch.hook.list_replica_pods(self.name, self.namespace, self._owner_uid(job))
            detail = waiting_detail(pods, due)  # the kubelet's words
        except ApiError as exc:
            detail = f"(the detail could not be read: {exc.message})"
        return self._event(
            "startup_error",
            job,
            startup_error(self.kind, self.namespace, self.name, self.policy.startup_error_grace, due, detail),
            {"waiting": dict(due)},  # which reasons: a retry may fix a pull error, not an invalid image name
        )

    def _owner_uid(self, job: Obj | None) -> str | None:
        """The uid pods and Events must belong to: the one this trigger was given, else (a
        sensor's) the job's as the watch saw it."""
        return self.uid or ((job or {}).get("metadata") or {}).get("uid")

    def _event(self, status: str, job: Obj | None, message: str, failed: Obj | None = None) -> TriggerEvent:
        """The one event; ``failed``: what ``_failed_logs`` found (the order of failure, the
        root cause's last lines as ``logs``), or what else the event carries (a predicted
        overrun's ``deadline``, for the task to defer again with)."""
        state = interpret(job)
        return TriggerEvent(
            {
                "status": status,
                "kind": self.kind,
                "name": self.name,
                "namespace": self.namespace,
                # The uid this trigger was given, never the one of the object now under the
                # name: the task deletes and patches by it, also without a task state store.
                "uid": self.uid or (job or {}).get("metadata", {}).get("uid"),
                "phase": state.phase,
                "message": message,
                "state": state.as_dict(),
                "logs": {},
                **(failed or {}),
            }
        )

    async def _failed_logs(self, job: Obj) -> Obj:
        """Print the failed replicas' logs into the task log, the first to fail first (see
        ``api/failed.py``); lines the wait streamed already are not repeated."""
        f = self.forwarding
        hook = self.make_hook()
        try:
            try:
                pods = await hook.list_replica_pods(self.name, self.namespace, self._owner_uid(job))
                live: set[str] | None = {str(p["metadata"]["name"]) for p in pods}
            except Exception as exc:  # noqa: BLE001 - the order then comes from the job's status alone
                self.log.warning("could not list the replicas to order their failures: %s", exc)
                pods, live = [], None
            kept = KeptLogs(job, self.log)
            plan = FailedLogs(
                first_failed(job, pods), f.max_log_lines, f.max_followed_pods, f.log_tail_lines, dict(self._streamed)
            )

            async def read(pod: str, lines: int | None, since: str | None = None) -> tuple[str, str | None]:
                # A pod clean-up deleted: the lines the controller kept of it (operators/logs.py).
                text = (
                    await hook.read_log_tail(pod, self.namespace, lines, timestamps=True, since=since)
                    if live is None or pod in live
                    else ""
                )
                if text and not unavailable(text):
                    return text, None
                if kept.logs is None:
                    try:
                        kept.take(await hook.get_evidence(self.name, self.namespace))
                    except Exception as exc:  # noqa: BLE001 - no access, unreachable: the task log says so
                        kept.failed_to_read(exc)
                return kept.lookup(pod, text)

            while (step := plan.next_read()) is not None:
                pod, asked = step
                text, kept_in = await read(pod, asked, plan.since(pod))  # a streamed replica: from its last streamed second
                lines = plan.add(pod, text, asked, kept_in)
                if lines is not None:  # None: the plan reads this log again with more lines
                    print_lines(self.log, plan.header(pod, len(lines)), lines)
            if plan.skipped():
                self.log.info(
                    "--- not printed (max_followed_pods or max_log_lines): the logs of %s ---", ", ".join(plan.skipped())
                )
            if (need := plan.tail_read()) is not None:
                text, kept_in = await read(*need)
                plan.set_tail(text, kept=kept_in is not None)
            return plan.report()
        finally:
            await hook.close()

    # -- kill ----------------------------------------------------------------------------
    async def on_kill(self) -> None:
        """A user killed the deferred task: do not leave the job running (``keep``: the user
        wants it; ``none``: a sensor's trigger, whose job belongs to another task).

        Airflow 3.3.2 also calls ``on_kill`` on a triggerer that lost its triggers to another
        one (its heartbeat lapsed past ``[triggerer] triggerer_health_check_threshold``: a
        stalled host, a database failover; apache/airflow#73454): when it wakes it cancels the
        triggers it no longer owns as if a user had. So the task's state is read first, through
        the task SDK: still ``deferred`` means the trigger moved and another triggerer watches
        the job, which is left alone; a state that cannot be read leaves it alone too (a job
        left running costs GPU time, one deleted costs the training). The whole of it ends within
        ``[triggerer] on_kill_timeout``, credentials and the API server's answer included."""
        if self.policy.on_kill_action in ("none", "keep"):
            return
        verb = "deleting" if self.policy.on_kill_action == "delete" else "pausing"
        if self._fired:
            self.log.info("not %s %s %s/%s on kill: the trigger had already reported it", verb, self.kind,
                          self.namespace, self.name)  # fmt: skip
            return
        budget = kill_budget(conf.getfloat("triggerer", "on_kill_timeout", fallback=30.0))
        stage = ["reading the task's state"]
        try:
            await within(self._kill_if_stopped(stage, verb), budget)
        except asyncio.TimeoutError:
            self.log.warning("not %s %s %s/%s: %s took longer than %gs ([triggerer] on_kill_timeout less a margin); "
                             "the job stays (delete or pause it by hand, or Clear the task: its retry reattaches)",
                             verb, self.kind, self.namespace, self.name, stage[0], budget)  # fmt: skip

    async def _kill_if_stopped(self, stage: list[str], verb: str) -> None:
        ti = getattr(self, "task_instance", None)
        if ti is not None:
            state, why = await task_state(ti)
            decision = kill_decision(state, why)
            if decision != "act":
                self.log.warning("not %s %s %s/%s on this cancellation: %s", verb, self.kind, self.namespace, self.name,
                                 decision)  # fmt: skip
                return
        stage[0] = "loading the triggerer's credentials"
        hook = self.make_hook()
        try:
            await hook.kube()
            stage[0] = f"{verb} the job (the API server's answer)"
            if self.policy.on_kill_action == "pause":
                # uid in the patch: the API server refuses it (422) for another object of the name;
                # the mark lets a retry resume this job (and no job paused by hand).
                try:
                    await hook.patch_job(self.kind, self.name, self.namespace, pause_patch(self.uid, "kill"))
                    self.log.info("paused %s %s/%s", self.kind, self.namespace, self.name)
                except ApiError as exc:
                    self.log.warning(
                        "not pausing %s/%s: it is gone or another object now (%s)", self.namespace, self.name, exc.message
                    )
            else:
                await hook.delete_job(self.kind, self.name, self.namespace, uid=self.uid)
                self.log.info("deleted %s %s/%s", self.kind, self.namespace, self.name)
        finally:
            await hook.close()


# Seconds kept back from ``[triggerer] on_kill_timeout``: the triggerer cancels ``on_kill`` at that
# bound without a word in the task log, so ours ends first and says what it left undone.
KILL_MARGIN = 2.0
# Seconds the task's state may take to arrive (through the triggerer's supervisor).
STATE_WITHIN = 10.0


def kill_budget(on_kill_timeout: float) -> float:
    """The seconds ``on_kill`` gives itself: the triggerer's bound less a margin, at least 1 s."""
    return max(1.0, on_kill_timeout - KILL_MARGIN) if on_kill_timeout > 0 else 1.0


def kill_decision(state: str | None, unreadable: str | None) -> str:
    """``act`` when the task instance is really being stopped, else why the job is left alone.

    ``state``: the task instance's state as the API server has it now (None: cleared, no state
    yet); ``unreadable``: why it could not be read (then ``state`` means nothing)."""
    if unreadable is not None:
        return (f"the task's state could not be read ({unreadable}), so this may be a triggerer losing its triggers "
                "to another one rather than a kill; the job stays")  # fmt: skip
    if state == "deferred":
        return ("the task is still deferred: this triggerer lost the trigger to another one (its heartbeat lapsed past "
                "[triggerer] triggerer_health_check_threshold), which watches the job now; the job stays")  # fmt: skip
    return "act"


async def task_state(ti: Any) -> tuple[str | None, str | None]:
    """(state, None) of the trigger's task instance, read through the task SDK as the cncf
    provider's ``safe_to_cancel`` does; (None, why) when it cannot be read."""
    try:
        from airflow.sdk.execution_time.comms import GetTaskStates
        from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

        map_index = getattr(ti, "map_index", None)
        mapped = map_index is not None and map_index >= 0
        msg = GetTaskStates(dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id], map_index=map_index if mapped else None)
        answer = await asyncio.wait_for(SUPERVISOR_COMMS.asend(msg), STATE_WITHIN)
    except asyncio.TimeoutError:
        return None, f"no answer within {STATE_WITHIN:g}s"
    except Exception as exc:  # noqa: BLE001 - no supervisor (not in a triggerer), an API error: unknown
        return None, f"{type(exc).__name__}: {exc}"
    return state_in(answer, ti)


def state_in(answer: Any, ti: Any) -> tuple[str | None, str | None]:
    """The task instance's state in a ``TaskStatesResult`` (run id -> task key -> state; a mapped
    instance's key is ``<task_id>_<map_index>``, as the execution API's ``/states`` names it)."""
    states = getattr(answer, "task_states", None)
    if not isinstance(states, dict):
        return None, f"the triggerer's supervisor answered {type(answer).__name__}: {str(answer)[:200]}"
    map_index = getattr(ti, "map_index", None)
    key = f"{ti.task_id}_{map_index}" if map_index is not None and map_index >= 0 else ti.task_id
    run = states.get(ti.run_id)
    if not isinstance(run, dict) or key not in run:
        return None, f"task instance {ti.dag_id}/{ti.run_id}/{key} not found"
    state = run[key]
    return (None if state is None else str(getattr(state, "value", state))), None
