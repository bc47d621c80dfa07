"""Part of ``T9kJobOperator``: a deadline miss seen coming (``api/overrun.py``; docs/progress.md,
"A deadline miss seen coming").

The operator writes on the job when the try must end by; the controller sets ``PredictedOverrun``
when the job's ETA ends past it. The waits print each turn of that condition into the task log (a
warning when late), and ``on_predicted_overrun`` is called once per try, on the worker: a deferred
task is resumed for it and deferred again (as KubernetesPodOperator resumes to fetch logs), so
the author's code never runs in the triggerer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_t9k.api import overrun
from airflow_t9k.api.outcome import condition
from airflow_t9k.k8s.errors import ApiError
from airflow_t9k.operators.logs import pods_to_follow

Obj = dict[str, Any]
PREDICTED_OVERRUN = overrun.PREDICTED_OVERRUN


@dataclass(frozen=True)
class PredictedOverrun:
    """What ``on_predicted_overrun(context, overrun)`` is given."""

    job: Obj  # kind, name, namespace, uid
    predicted_end: datetime | None  # when the ETA says the job ends
    deadline: datetime | None
    deadline_source: str  # "the task's execution_timeout", "the DAG run's deadline alert 'nightly'", ...
    message: str  # the controller's, as the task log and the job's Event say it


class OverrunMixin:
    """``on_predicted_overrun``, and the deadline the job carries."""

    hook: Any
    log: Any
    timeout: float | None
    execution_timeout: Any
    on_predicted_overrun: Callable[[Any, PredictedOverrun], Any] | None
    _identity: Obj | None
    _follow_pods: list[str] | None
    log_replicas: str
    max_followed_pods: int
    _trigger: Callable[..., Any]
    _recorded: Callable[[Any, Obj], Obj]
    _patch_exact: Callable[[Obj, Obj], Obj | None]

    def _init_overrun(self, callback: Any) -> None:
        if callback is not None and not callable(callback):
            raise ValueError(f"on_predicted_overrun must be callable (context, overrun), got {callback!r}")
        self.on_predicted_overrun = callback
        self._overrun_called = False
        self._overrun_context: Any = None
        self._overrun_note: str | None = None

    def _try_deadline(self, context: Any) -> tuple[datetime, str] | None:
        """The earliest time this try must end by, and what it is."""
        candidates: list[tuple[datetime | None, str]] = []
        if self.timeout is not None:
            candidates.append((datetime.fromtimestamp(time.time() + float(self.timeout), timezone.utc), "the task's timeout"))
        start = getattr(context.get("ti"), "start_date", None)
        if self.execution_timeout is not None and isinstance(start, datetime):
            start = start if start.tzinfo is not None else start.replace(tzinfo=timezone.utc)
            candidates.append((start + self.execution_timeout, "the task's execution_timeout"))
        dag = getattr(self, "dag", None) if getattr(self, "has_dag", lambda: False)() else None
        alerts = getattr(dag, "deadline", None) or []
        candidates.extend(overrun.alert_deadline(alert, context.get("dag_run")) for alert in alerts)
        return overrun.earliest(candidates)

    def _mark_deadline(self, context: Any, job: Obj, current: Obj | None) -> None:
        """The try's deadline on the job to submit (``job``) or on the job a retry reattached to
        (``current``: patched, uid-guarded, when an earlier try wrote another)."""
        self._overrun_context = context
        marks = overrun.marks(self._try_deadline(context))
        if current is None:
            job["metadata"].setdefault("annotations", {}).update(marks)
            return
        have = current["metadata"].get("annotations") or {}
        if marks and any(have.get(k) != v for k, v in marks.items()):
            try:
                self._patch_exact(current, {"metadata": {"uid": current["metadata"]["uid"], "annotations": marks}})
            except ApiError as exc:  # the try goes on: only the prediction of a miss is lost
                self.log.warning("could not write this try's deadline on %s %s (%s); its PredictedOverrun is judged "
                                 "against the earlier try's", current.get("kind"), current["metadata"].get("name"),
                                 exc.message)  # fmt: skip

    def _overrun_seen(self, job: Obj | None, context: Any = None) -> None:
        """Each turn of the job's ``PredictedOverrun`` into the task log once; the callback once per try."""
        note = overrun.note(job)
        if note is None or job is None:
            return
        if note[0] != self._overrun_note:
            meta = job["metadata"]
            (self.log.warning if note[2] else self.log.info)("%s %s: %s", job.get("kind"), meta.get("name"), note[1])
            self._overrun_note = note[0]
        if note[2]:
            self._call_overrun(context or self._overrun_context, job)

    def _call_overrun(self, context: Any, job: Obj) -> None:
        if self.on_predicted_overrun is None or self._overrun_called:
            return
        self._overrun_called = True
        meta = job["metadata"]
        annotations = meta.get("annotations") or {}
        cond = condition((job.get("status") or {}), overrun.CONDITION) or {}
        given = PredictedOverrun(
            job={
                "kind": job.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": (self._identity or {}).get("uid") or meta.get("uid"),
            },
            predicted_end=overrun.predicted_end(job.get("status") or {}),
            deadline=overrun.parse_time(annotations.get(overrun.DEADLINE)),
            deadline_source=str(annotations.get(overrun.DEADLINE_SOURCE) or ""),
            message=str(cond.get("message") or ""),
        )
        try:
            self.on_predicted_overrun(context, given)
        except Exception:  # the author's callback must not fail the training
            self.log.exception("on_predicted_overrun raised; the task goes on waiting for its job")

    def _resume_for_overrun(self, context: Any, event: Obj) -> None:
        """The trigger resumed the task for the callback: call it, then defer again on the same
        job with the same deadline, this time without resuming for it."""
        ours = self._recorded(context, event)
        identity = {k: ours.get(k) for k in ("kind", "name", "namespace", "uid")}
        self._identity = {**identity, "server": self.hook.api_client.configuration.host}
        key = event.get("overrun_key")
        self._overrun_note = key if isinstance(key, str) else None  # said here, once: the next trigger does not
        self.log.warning("%s %s: %s", identity["kind"], identity["name"], event.get("message"))
        job = self.hook.get_job(identity["kind"], identity["name"], identity["namespace"])
        if job is not None and job["metadata"].get("uid") == identity["uid"]:
            self._call_overrun(context, job)
            self._follow_pods = pods_to_follow(job, self.log_replicas, self.max_followed_pods)
        self._overrun_called = True  # whatever the read found: once per try
        deadline = overrun.parse_time(event.get("deadline"))
        self.defer(  # type: ignore[attr-defined]  # BaseOperator's
            trigger=self._trigger(identity, deadline.timestamp() if deadline else None, overrun_callback=False),
            method_name="execute_complete",
        )
