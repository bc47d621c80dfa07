"""The end of a task: what the final event means (success, failure, timeout, a job that cannot
start), the result, clean-up, and what a kill does to the job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException, AirflowTaskTimeout
from airflow.sdk.execution_time.context import NEVER_EXPIRE  # airflow.sdk re-exports it lazily; its stub does not name it

from airflow_t9k.api import taskcost
from airflow_t9k.api.failed import root_cause
from airflow_t9k.api.outcome import JobState, describe_usage, interpret
from airflow_t9k.api.result import message_of, parse_source
from airflow_t9k.api.result import parse as parse_result
from airflow_t9k.api.retry import permanent, startup_permanent
from airflow_t9k.api.runmode import pause_patch
from airflow_t9k.api.taskcost import COST_KEY
from airflow_t9k.k8s.errors import ApiError
from airflow_t9k.kinds.registry import get_kind
from airflow_t9k.operators.failures import failure, startup_failure
from airflow_t9k.operators.manifest import STATE_KEY
from airflow_t9k.operators.overrun import PREDICTED_OVERRUN

Obj = dict[str, Any]


class EndMixin:
    """Part of ``T9kJobOperator``: completion, results, deletes and kills."""

    hook: Any
    log: Any
    result_from: str | None
    delete_on_finish: str
    on_kill_action: str
    log_tail_lines: int
    permanent_exit_codes: frozenset[int] | None
    skip_on_exit_code: frozenset[int] | None
    _identity: Obj | None
    _waited: bool
    _try_number: int
    _record_lineage: Any
    _emit_assets: Any
    _delivered: Callable[[Any, Obj, Obj], None]
    _push: Callable[[Any, str, Any], None]

    # The operator's other parts (operators/submit.py, operators/wait.py).
    _consume: Callable[[Obj], None]
    _event_from: Callable[..., Obj]
    _delete_exact: Callable[[str, str, str, str | None], bool]
    _patch_exact: Callable[[Obj, Obj], Obj | None]
    _resume_for_overrun: Callable[[Any, Obj], None]  # operators/overrun.py: defers again
    _cache_success: Callable[[Any, Obj, Any, Any], None]  # operators/cache.py
    _record_history: Callable[[Any, Obj, Obj, Any], None]  # operators/history.py

    def execute_complete(self, context: Any, event: Obj) -> Obj:
        self._try_number = int(getattr(context["ti"], "try_number", 0) or 0)
        if event.get("status") == PREDICTED_OVERRUN:  # resumed for on_predicted_overrun: call it, defer again
            self._resume_for_overrun(context, event)
        return self._finish(context, event)

    def _recorded(self, context: Any, event: Obj) -> Obj:
        """The job this task submitted, as recorded before waiting. The event's uid may be that
        of another object that took the name meanwhile; deletes and patches must not use it."""
        store = context.get("task_state_store")
        saved = self._identity or (store.get(STATE_KEY) if store is not None else None)
        if saved and saved.get("name") == event.get("name") and saved.get("namespace") == event.get("namespace"):
            return {**event, "uid": saved.get("uid")}
        return event

    def _with_task_total(self, context: Any, ours: Obj, usage: Obj) -> Obj:
        """``usage`` with ``task_total``: the sum over every job this task instance's tries and
        re-runs ended with (``api/taskcost.py``), kept in the task state store for good."""
        store = context.get("task_state_store")
        history = store.get(COST_KEY) if store is not None else None
        if ours.get("uid"):
            history = taskcost.record(history, self._try_number, str(ours["uid"]), usage)
            if store is not None:
                store.set(COST_KEY, history, retention=NEVER_EXPIRE)
        return {**usage, "task_total": taskcost.total(history)}

    def _finish(self, context: Any, event: Obj) -> Obj:
        status = event.get("status")
        state = JobState(**{**{k: v for k, v in (event.get("state") or {}).items() if k in ("phase", "message", "reason")},
                            "aggregate": (event.get("state") or {}).get("aggregate") or {},
                            "failed_replicas": tuple((event.get("state") or {}).get("failed_replicas") or ()),
                            "root_cause": dict((event.get("state") or {}).get("root_cause") or {})})  # fmt: skip
        ti = context["ti"]
        self._push(ti, "phase", event.get("phase"))
        self._push(ti, "summary", state.summary())
        ours = self._recorded(context, event)
        if status == "failed" and ours.get("uid"):
            self._consume(ours)  # a later try runs the job anew; a success is marked once delivered (below)
        if not event.get("logs_printed"):  # an event from before the failed logs were printed by the wait
            for pod, tail in (event.get("logs") or {}).items():
                self.log.info("--- last %d log lines of failed replica %s ---\n%s", self.log_tail_lines, pod, tail)
        result = self._result(event) if status in ("success", "failed") else None
        usage = (event.get("state") or {}).get("usage")
        if status in ("success", "failed", "timeout", "startup_error") and usage:  # status.usage, docs/usage.md
            with_total = self._with_task_total(context, ours, usage)  # the job's, and the task instance's in all
            self._task_total = with_total["task_total"]  # for the task's history (operators/history.py)
            if status in ("success", "failed"):
                self._push(ti, "usage", with_total)
            self.log.info("%s %s used: %s", event.get("kind"), event.get("name"), describe_usage(usage))
            self.log.info("this task instance in all: %s", taskcost.describe(with_total["task_total"]))
        metrics = (event.get("state") or {}).get("metrics")
        if status in ("success", "failed") and metrics:  # what the replica reported last (status.progress, docs/progress.md)
            self._push(ti, "metrics", metrics)
            self.log.info(
                "%s %s reported last: %s", event.get("kind"), event.get("name"), (event.get("state") or {}).get("progress")
            )
        self._record_lineage(ours, event.get("phase"), result, usage)  # for OpenLineage (operators/lineage.py)
        if status in ("success", "failed"):  # the task's history across runs (operators/history.py)
            self._record_history(context, ours, event, result)
        if status == "success":
            self.log.info("%s %s succeeded: %s", event.get("kind"), event.get("name"), state.summary())
            if result is not None:
                self._push(ti, "result", result)
            self._emit_assets(context, result, ours)  # outlets' events carry the result (operators/assets.py)
            self._cache_success(context, ours, result, metrics)  # cache=True: for later runs (operators/cache.py)
            # Last of what the try delivers: from here a retry of this series delivers it again.
            self._delivered(context.get("task_state_store"), ours, event)
            if self.delete_on_finish in ("always", "on_success"):
                self._clean_up(ours)
            return {k: event.get(k) for k in ("kind", "name", "namespace", "uid", "phase")} | {
                "summary": state.summary(),
                "result": result,
            }
        if status in ("timeout", "startup_error"):
            ended = self._ended_meanwhile(ours)
            if ended is not None:  # the job finished after all: its outcome, not a timeout
                return self._finish(context, ended)
            try:
                self._kill_job(ours, status)
            except ApiError as exc:  # the cluster may be what timed out; the task still ends
                self.log.warning("could not %s %s %s/%s after the %s: %s", self.on_kill_action, ours["kind"],
                                 ours["namespace"], ours["name"], status, exc.message)  # fmt: skip
            if status == "startup_error":  # the job cannot start: a retry may (a registry's limit), unless it surely cannot
                text = event.get("message") or "the job cannot start"
                why_not = startup_permanent(event.get("waiting"), text)
                if why_not:
                    raise startup_failure(f"{text}\nnot retried: {why_not}", event, permanent=True)
                raise startup_failure(text, event, permanent=False)
            raise AirflowTaskTimeout(event.get("message") or "timed out")
        if self.delete_on_finish == "always":
            if status == "failed":
                self._clean_up(ours)
            else:  # the wait failed, not (surely) the job: a triggerer's 403 must not cost a running training
                self._clean_up_if_over(ours, status)
        order = event.get("failed_first") or []
        replicas = ", ".join([str(r["pod"]) for r in order] or list(state.failed_replicas))  # the first to fail first
        detail = f"; failed replicas: {replicas}" if replicas else ""
        why = (event.get("state") or {}).get("replica_failure")
        if why:
            detail += f" ({why})"
        detail += root_cause(order)
        if result is not None:
            detail += f"\n--- result (termination message) of the deciding replica ---\n{result}"
        cause = state.root_cause
        if not order and cause.get("replica"):  # the controller's record (status.rootCause) when no logs were read
            detail += f"; root cause: replica {cause['replica']} failed first ({cause.get('detail', '')})"
        tails = "".join(f"\n--- last lines of {p} ---\n{t}" for p, t in (event.get("logs") or {}).items())
        text = f"{event.get('kind')} {event.get('namespace')}/{event.get('name')}: {event.get('message')}{detail}{tails}"
        code = state.root_cause.get("exitCode")
        if self.skip_on_exit_code and isinstance(code, int) and code in self.skip_on_exit_code:
            raise AirflowSkipException(f"{text}\nskipped: the first failed replica exited with {code}, in skip_on_exit_code")
        why_not = permanent(state, self.permanent_exit_codes)
        if why_not:  # retrying cannot help: fail now and keep the retries (and the GPUs) for what can
            raise failure(f"{text}\nnot retried: {why_not}", event, cause, permanent=True)
        raise failure(text, event, cause, permanent=False)  # typed: a retry_policy can route it (operators/failures.py)

    def _ended_meanwhile(self, ours: Obj) -> Obj | None:
        """Re-read the job before acting on a timeout: a trigger that ran late (or a stale
        event) may say ``timeout`` for a job that has since ended, and deleting it would throw
        away a finished training. The final event of that end, or None."""
        if not ours.get("uid"):
            return None
        try:
            job = self.hook.get_job(ours["kind"], ours["name"], ours["namespace"])
        except ApiError as exc:  # the cluster may be what timed out; the timeout stands
            self.log.warning(
                "could not re-read %s %s/%s after the timeout: %s", ours["kind"], ours["namespace"], ours["name"], exc.message
            )
            return None
        if job is None or job["metadata"].get("uid") != ours["uid"]:
            return None
        state = interpret(job)
        if not state.terminal:
            return None
        self.log.info(
            "%s %s/%s ended (%s) by the time its timeout was handled",
            ours["kind"],
            ours["namespace"],
            ours["name"],
            state.summary(),
        )
        return self._event_from(job, "success" if state.succeeded else "failed")

    def _result(self, event: Obj) -> Any:
        """The job's result: the deciding replica's termination message as the controller kept it
        in status, or, with ``result_from``, that replica's (and container's) read from its pod."""
        if self.result_from is None:
            return None
        if self.result_from == "auto":
            return parse_result((event.get("state") or {}).get("result_message"))
        rtype, rank, container = parse_source(self.result_from)
        kind = get_kind(str(event.get("kind")))
        name = kind.pod_name({"metadata": {"name": event.get("name")}}, rtype, rank)
        pod = self.hook.get_pod(name, str(event.get("namespace")))
        if pod is None:
            self.log.warning("no result: replica pod %s is gone (cleaned up?); the deciding replica's result is kept "
                             "in the job's status, result_from='auto'", name)  # fmt: skip
            return None
        return parse_result(message_of(pod, container, prefer=(kind.main_container(pod.get("spec") or {}) or {}).get("name")))

    def _clean_up(self, ident: Obj) -> None:
        """``delete_on_finish``: a job the task has finished with goes; one that cannot be deleted
        (no delete right, the API server failing) stays, with a warning, and the task's outcome
        is the job's, not the clean-up's."""
        try:
            self._delete(ident)
        except ApiError as exc:
            self.log.warning("could not delete %s %s/%s (delete_on_finish=%r): %s; it stays until deleted otherwise",
                             ident["kind"], ident["namespace"], ident["name"], self.delete_on_finish, exc.message)  # fmt: skip

    def _clean_up_if_over(self, ident: Obj, status: object) -> None:
        """``delete_on_finish="always"`` after an event that is not the job's end (``error``: the
        triggerer could not read the job, a missing CRD, an exception in the trigger). The job
        is read again: gone, or ended, it is cleaned up as usual; still running (or unreadable),
        it stays for the retry to reattach to, since deleting it would train from scratch."""
        if not ident.get("uid"):
            return
        try:
            job = self.hook.get_job(ident["kind"], ident["name"], ident["namespace"])
        except ApiError as exc:
            self.log.warning("not deleting %s %s/%s after the %s event: it could not be read again (%s); a running "
                             "job stays for the retry to reattach to", ident["kind"], ident["namespace"], ident["name"],
                             status, exc.message)  # fmt: skip
            return
        if job is None or job["metadata"].get("uid") != ident["uid"]:
            return  # gone already (or another object took the name): nothing of ours to delete
        state = interpret(job)
        if state.terminal:
            self._clean_up(ident)
            return
        self.log.warning("not deleting %s %s/%s (delete_on_finish='always'): the %s event was about the wait, and the "
                         "job is still %s; the retry reattaches to it", ident["kind"], ident["namespace"], ident["name"],
                         status, state.phase or "not started")  # fmt: skip

    def _delete(self, ident: Obj) -> None:
        if self._delete_exact(ident["kind"], ident["name"], ident["namespace"], ident.get("uid")):
            self.log.info("deleted %s %s/%s", ident["kind"], ident["namespace"], ident["name"])

    def _kill_job(self, ident: Obj, why: str = "kill") -> None:
        if self.on_kill_action == "keep":
            self.log.info(
                "keeping %s %s/%s after the %s (on_kill_action='keep')", ident["kind"], ident["namespace"], ident["name"], why
            )
        elif self.on_kill_action == "pause":
            job = {
                "kind": ident["kind"],
                "metadata": {"name": ident["name"], "namespace": ident["namespace"], "uid": ident.get("uid")},
            }
            if self._patch_exact(job, pause_patch(ident.get("uid"), f"{why} of try {self._try_number}")) is not None:
                self.log.info("paused %s %s/%s; a retry resumes it", ident["kind"], ident["namespace"], ident["name"])
        else:
            self._delete(ident)

    def on_kill(self) -> None:
        # Not once the wait has seen the job end: the end is the task's to handle, and a kill
        # arriving then (Mark success) must not delete or pause a finished job.
        if self._identity is not None and not self._waited:
            self._kill_job(self._identity)
