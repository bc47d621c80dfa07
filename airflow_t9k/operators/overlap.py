"""Part of ``T9kJobOperator``: ``overlap=``, when the job an earlier DAG run of this task submitted
still runs (``api/overlap.py`` decides; docs/airflow.md, "Overlapping runs").

Checked only by a try that is about to submit a job: a try that reattaches to its own task's
job, or delivers a result again, never looks at other runs. The earlier run is the latest one,
by logical date (then by when it pushed), whose try of this task and map index pushed XCom
``t9k_job``: a run skipped by ``overlap='skip'`` pushed none, so the run after it still finds
the job that holds the GPUs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from airflow_t9k.api import overlap
from airflow_t9k.api.paths import job_path
from airflow_t9k.api.resources import resource_for
from airflow_t9k.k8s.errors import ApiError, is_transient
from airflow_t9k.links import XCOM_IDENTITY
from airflow_t9k.operators.earlier import earlier_xcom
from airflow_t9k.triggers.job import T9kJobTrigger
from airflow_t9k.triggers.records import Connection, Forwarding, JobRef, WaitPolicy

Obj = dict[str, Any]


class OverlapMixin:
    """``overlap=``: allow, wait, skip or supersede the job of an earlier DAG run of this task."""

    hook: Any
    log: Any
    overlap: str
    deferrable: bool
    kubernetes_conn_id: str | None
    config_file: str | None
    cluster_context: str | None
    in_cluster: bool | None
    on_kill_action: str
    _end_replaced: Callable[[Obj], None]  # operators/submit.py: ends a job as on_kill_action says, uid-guarded

    def _earlier_job(self, context: Any) -> tuple[Obj | None, Obj | None]:
        """The identity the latest earlier run of this task (same map index) pushed, and the job
        the cluster has under its name now (None, None when no earlier run pushed one)."""
        identity = overlap.earlier_identity(earlier_xcom(context, XCOM_IDENTITY, f"overlap={self.overlap!r}", self.log))
        if identity is None:
            return None, None
        return identity, self.hook.get_job(identity["kind"], identity["name"], identity["namespace"])

    def _check_overlap(self, context: Any) -> None:
        """Return to submit this run's job; skip the task, defer, or wait here otherwise."""
        if self.overlap == "allow":
            return
        run_id = context["ti"].run_id
        while True:
            identity, job = self._earlier_job(context)
            decision = overlap.decide(self.overlap, job, identity, run_id)
            if decision.action == overlap.PROCEED:
                if identity is not None and self.overlap == "wait":
                    self.log.info("overlap='wait': no earlier run's job of this task runs (the last was %s/%s)",
                                  identity["namespace"], identity["name"])  # fmt: skip
                return
            if identity is None or job is None:  # decide() proceeds then; for the type checker
                return
            if decision.action == overlap.SKIP:
                self.log.warning("overlap='skip': %s; this run's task is skipped and trains nothing", decision.why)
                raise AirflowSkipException(f"overlap='skip': {decision.why}")
            if decision.action == overlap.SUPERSEDE:
                self.log.warning("overlap='supersede': %s; ending it as on_kill_action=%r says, then training this run's "
                                 "data", decision.why, self.on_kill_action)  # fmt: skip
                self._end_replaced(job)  # uid-guarded (operators/submit.py)
                return
            self.log.info("overlap='wait': %s; waiting until it ends", decision.why)
            if self.deferrable:
                self._defer_on_earlier(context, identity)
            self._wait_earlier_sync(identity)

    def _defer_on_earlier(self, context: Any, identity: Obj) -> None:
        """Defer until the earlier job ends (no logs or Events of it forwarded: it is not this
        task's job, and nothing is done to it on a kill); then ``execute`` decides again."""
        deadline = self._wait_deadline(context)
        ref = JobRef(kind=identity["kind"], name=identity["name"], namespace=identity["namespace"], uid=identity["uid"])
        connection = Connection(kubernetes_conn_id=self.kubernetes_conn_id, config_file=self.config_file,
                                cluster_context=self.cluster_context, in_cluster=self.in_cluster)  # fmt: skip
        policy = WaitPolicy(deadline=deadline.isoformat() if deadline else None, startup_timeout=None,
                            startup_error_grace=None, on_kill_action="none")  # fmt: skip
        # events_since is the deferral's time: the trigger holds an event that comes within
        # [t9k] deferral_hold_seconds of it, past Airflow's stale defer-exit race (apache/airflow#72716),
        # which failed this task when the earlier job ended seconds after it deferred.
        forwarding = Forwarding(log_events=False, stream_logs=False, save_log_cursor=False,
                                events_since=datetime.now(timezone.utc).isoformat())  # fmt: skip
        self.defer(  # type: ignore[attr-defined]  # BaseOperator's
            trigger=T9kJobTrigger(job=ref, connection=connection, policy=policy, forwarding=forwarding),
            method_name="execute_after_overlap",
            timeout=(deadline - datetime.now(timezone.utc)) if deadline else None,
        )

    def execute_after_overlap(self, context: Any, event: Obj) -> Any:
        """The earlier job ended (or the wait ended otherwise): decide again from the start."""
        if event.get("status") == "timeout":
            from airflow.sdk.exceptions import AirflowTaskTimeout

            raise AirflowTaskTimeout(f"overlap='wait': {event.get('message') or 'timed out'} (execution_timeout)")
        return self.execute(context)  # type: ignore[attr-defined]  # T9kJobOperator's

    def _wait_deadline(self, context: Any) -> datetime | None:
        start = getattr(context.get("ti"), "start_date", None)
        timeout = getattr(self, "execution_timeout", None)
        if timeout is None or not isinstance(start, datetime):
            return None
        return start + timeout if start.tzinfo else start.replace(tzinfo=timezone.utc) + timeout

    def _wait_earlier_sync(self, identity: Obj) -> None:
        """Watch the earlier job on the worker until it changes (or 60 s pass); the caller reads
        it again. Airflow's ``execution_timeout`` bounds the whole wait."""
        from kubernetes import watch

        resource = resource_for(identity["kind"])
        job = self.hook.get_job(identity["kind"], identity["name"], identity["namespace"])
        if job is None or job["metadata"].get("uid") != identity["uid"]:
            return
        w = watch.Watch()
        try:
            with self.hook.boundary("WATCH", job_path(resource, identity["namespace"])):
                for _ in w.stream(
                    self.hook.custom_object_client.list_namespaced_custom_object, resource.group, resource.version,
                    identity["namespace"], resource.plural, field_selector=f"metadata.name={identity['name']}",
                    resource_version=job["metadata"]["resourceVersion"], timeout_seconds=60,
                ):  # fmt: skip
                    w.stop()
        except ApiError as exc:
            if not is_transient(exc):
                raise
            self.log.warning("overlap='wait': %s; reading the earlier job again in 5 s", exc.message)
            time.sleep(5)
