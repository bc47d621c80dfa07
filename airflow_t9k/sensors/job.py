"""``T9kJobSensor``: wait for a job (by name, by labels, or the job of a task) to reach a phase.

Given labels or a task, it follows the newest try's job of that task (``api/follow.py``), also
one a retry submits while the sensor waits. A job it has seen that is deleted ends the wait with
an error rather than the sensor's timeout."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from airflow_t9k.api.follow import Ambiguous, choose, task_selector
from airflow_t9k.api.outcome import TERMINAL_PHASES, interpret
from airflow_t9k.api.selector import parse as parse_selector
from airflow_t9k.triggers.job import T9kJobTrigger
from airflow_t9k.triggers.records import Connection, Forwarding, JobRef, WaitPolicy

if TYPE_CHECKING:
    from airflow_t9k.hooks.t9k import T9kHook


# Phases a job reaches only after it went through the target phase: a sensor waiting for Running
# that looks after the job ended has seen a job that ran (a Failed job may never have).
PASSED_THROUGH: dict[str, tuple[str, ...]] = {"Running": ("Succeeded",)}
SEEN_KEY = "t9k_sensor_seen"  # the job a poke saw, for the pokes after a reschedule


def _phases(value: Any) -> tuple[str, ...]:
    """Target phases as given, or rendered from a template to one string ("Running,Succeeded")."""
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    return tuple(str(p) for p in value)


class T9kJobSensor(BaseSensorOperator):
    """
    :param kind: the job kind (templated)
    :param name: the job's name; or give ``label_selector`` (one job must match, or the jobs of one
        task: the newest try's is followed), or ``task``
    :param task: ``(dag_id, task_id)``, ``(dag_id, task_id, run_id)`` or ``(dag_id, task_id, run_id,
        map_index)`` of the task whose job to follow across its retries (the newest try's job);
        run id by default this sensor's own run's, map index -1 (templated)
    :param namespace: its namespace (default: the connection's ``namespace`` extra, then ``default``)
    :param target_phases: phases that end the wait successfully (default ``Succeeded``; templated;
        a non-terminal phase such as ``Running`` ends it as soon as the job gets there)
    :param kubernetes_conn_id: the ``kubernetes`` connection (templated)
    :param config_file: a kubeconfig path instead of the connection's; the triggerer reads it too
    :param cluster_context: the kubeconfig context
    :param in_cluster: use the pod's ServiceAccount
    :param deferrable: wait in the triggerer, from the start (also while the job does not exist
        yet); a terminal phase outside the targets fails at once
    :param log_events: forward the job's Kubernetes Events into the task log while deferred
    :param stream_logs: follow the replicas' logs into the task log while deferred (off: the
        job usually belongs to another task, which already shows them)
    """

    template_fields: Sequence[str] = ("name", "namespace", "label_selector", "task", "kind", "target_phases",
                                      "kubernetes_conn_id", "config_file", "cluster_context")  # fmt: skip

    def __init__(
        self,
        *,
        kind: str,
        name: str | None = None,
        label_selector: str | None = None,
        task: tuple[Any, ...] | list[Any] | None = None,
        namespace: str | None = None,
        target_phases: tuple[str, ...] | list[str] | str = ("Succeeded",),
        kubernetes_conn_id: str | None = "kubernetes_default",
        config_file: str | None = None,
        cluster_context: str | None = None,
        in_cluster: bool | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        log_events: bool = False,
        stream_logs: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if [name, label_selector, task].count(None) != 2:
            raise ValueError("give exactly one of name=, label_selector= or task=")
        if task is not None and (not isinstance(task, (tuple, list)) or not 2 <= len(task) <= 4):
            raise ValueError(f"task must be (dag_id, task_id[, run_id[, map_index]]), got {task!r}")
        self.kind = kind
        self.name = name
        self.label_selector = label_selector
        self.task = tuple(task) if task is not None else None
        self._run_id: str | None = None
        self._seen: str | None = None  # the name of the job seen, for "deleted after it was seen"
        self.namespace = namespace
        self.target_phases = target_phases if isinstance(target_phases, str) else tuple(target_phases)
        self.kubernetes_conn_id = kubernetes_conn_id
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.in_cluster = in_cluster
        self.deferrable = deferrable
        self.log_events = log_events
        self.stream_logs = stream_logs

    @property
    def hook(self) -> T9kHook:
        if getattr(self, "_hook", None) is None:
            from airflow_t9k.hooks.t9k import T9kHook  # here, not at the top: see hooks/__init__.py

            self._hook = T9kHook(kubernetes_conn_id=self.kubernetes_conn_id, config_file=self.config_file,
                                 cluster_context=self.cluster_context, in_cluster=self.in_cluster)  # fmt: skip
        return self._hook

    @property
    def targets(self) -> tuple[str, ...]:
        return _phases(self.target_phases)

    def _namespace(self) -> str:
        return self.namespace or self.hook.get_namespace() or "default"

    def _selector(self) -> str | None:
        """The label selector to find the job by (``task`` as the operators label their jobs)."""
        if self.task is None:
            return self.label_selector
        from airflow_t9k.operators.manifest import _label_value

        dag_id, task_id, run_id, map_index = (*self.task, None, None)[:4]
        run_id = run_id or self._run_id
        if not run_id:
            raise AirflowException("task= without a run id: give (dag_id, task_id, run_id) outside a DAG run")
        index = -1 if map_index in (None, "") else int(map_index)
        labels = {"dag-id": _label_value(str(dag_id)), "run-id": _label_value(str(run_id)), "task-id": _label_value(str(task_id)),
                  "map-index": str(index) if index >= 0 else "none"}  # fmt: skip
        return task_selector(labels)

    def _job(self) -> dict[str, Any] | None:
        if self.name is not None:
            return self.hook.get_job(self.kind, self.name, self._namespace())
        selector = self._selector() or ""
        try:
            return choose(self.hook.list_jobs(self.kind, self._namespace(), selector), f"label selector {selector!r}")
        except Ambiguous as exc:
            raise AirflowException(str(exc)) from None

    def poke(self, context: Any) -> bool:
        self._run_id = self._run_id or _run_id(context)
        # In mode="reschedule" every poke is a new process: which job was seen is kept in the task
        # state store, so a job deleted after it was seen fails the sensor instead of waiting it out.
        store = context.get("task_state_store") if hasattr(context, "get") else None
        saved = store.get(SEEN_KEY) if store is not None and self._seen is None else None
        if isinstance(saved, str):
            self._seen = saved
        before = self._seen
        try:
            return self._check(self._job())
        finally:
            if store is not None and self._seen is not None and self._seen != before:
                store.set(SEEN_KEY, self._seen)

    def _check(self, job: dict[str, Any] | None) -> bool:
        state = interpret(job)
        self.log.info("%s %s: %s", self.kind, self.name or self._selector(), state.summary())
        if job is None:
            if self._seen is not None:
                raise AirflowException(f"{self.kind} {self._seen} was deleted after it was seen (wanted {self.targets})")
            return False
        if self.name is None and self._seen not in (None, job["metadata"]["name"]):
            self.log.info("following %s %s, the newest try's job of the task", self.kind, job["metadata"]["name"])
        self._seen = str(job["metadata"]["name"])
        if state.phase in self.targets:
            return True
        passed = sorted(t for t in self.targets if state.phase in PASSED_THROUGH.get(t, ()))
        if passed:  # e.g. Running wanted, and the job has run and ended since the last look
            self.log.info("%s %s is %s: it went through %s", self.kind, job["metadata"]["name"], state.phase, ", ".join(passed))
            return True
        if state.phase in TERMINAL_PHASES:
            raise AirflowException(
                f"{self.kind} {job['metadata']['name']} ended {state.phase}, not in {self.targets}: {state.message}"
            )
        return False

    def execute(self, context: Any) -> Any:
        self._run_id = _run_id(context)
        if not self.deferrable:
            return super().execute(context)
        selector = self._selector()
        if selector is not None:
            try:
                parse_selector(selector)  # a bad one fails here, not in the triggerer
            except ValueError as exc:
                raise AirflowException(str(exc)) from None
        # One read on the worker first, as Airflow's own deferrable sensors do: a job already at a
        # target phase ends the task here (a trigger firing within a second of the deferral meets
        # apache/airflow#72716), one that ended elsewhere fails it here.
        if self._check(self._job()):
            return None
        deadline = datetime.now(timezone.utc) + timedelta(seconds=self.timeout) if self.timeout else None
        self.defer(
            trigger=T9kJobTrigger(
                job=JobRef(kind=self.kind, name=self.name or "", label_selector=selector, namespace=self._namespace()),
                connection=Connection(kubernetes_conn_id=self.kubernetes_conn_id, config_file=self.config_file,
                                      cluster_context=self.cluster_context, in_cluster=self.in_cluster),
                policy=WaitPolicy(
                    deadline=deadline.isoformat() if deadline else None, target_phases=tuple(self.targets),
                    wait_for_creation=True, on_kill_action="none",
                    startup_error_grace=None,  # the job is another task's, which decides when it cannot start
                ),
                forwarding=Forwarding(log_events=self.log_events, stream_logs=self.stream_logs,
                                      events_since=datetime.now(timezone.utc).isoformat()),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )  # fmt: skip

    def execute_complete(self, context: Any, event: dict[str, Any]) -> None:
        phase = event.get("phase")
        if phase in self.targets:
            return
        if event.get("status") == "timeout":
            raise AirflowSensorTimeout(f"{self.kind} {event.get('name')}: {event.get('message')} (wanted {self.targets})")
        raise AirflowException(f"{self.kind} {event.get('name')}: {event.get('message')} (wanted {self.targets})")


def _run_id(context: Any) -> str | None:
    """The run this sensor runs in (``task=`` follows the task of the same run by default)."""
    ti = (context or {}).get("ti")
    return (context or {}).get("run_id") or getattr(ti, "run_id", None)
