"""``T9kJobSensor``: wait for a job that already exists (by name, or by labels) to reach a phase."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

from airflow.sdk import BaseSensorOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from airflow_t9k.api.outcome import TERMINAL_PHASES, interpret
from airflow_t9k.api.selector import parse as parse_selector
from airflow_t9k.hooks.t9k import T9kHook
from airflow_t9k.triggers.job import T9kJobTrigger
from airflow_t9k.triggers.records import Connection, Forwarding, JobRef, WaitPolicy


def _phases(value: Any) -> tuple[str, ...]:
    """Target phases as given, or rendered from a template to one string ("Running,Succeeded")."""
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    return tuple(str(p) for p in value)


class T9kJobSensor(BaseSensorOperator):
    """
    :param kind: the job kind (templated)
    :param name: the job's name; or give ``label_selector`` (exactly one job must match)
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

    template_fields: ClassVar[tuple[str, ...]] = ("name", "namespace", "label_selector", "kind", "target_phases",
                                                  "kubernetes_conn_id")  # fmt: skip

    def __init__(
        self,
        *,
        kind: str,
        name: str | None = None,
        label_selector: str | None = None,
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
        if (name is None) == (label_selector is None):
            raise ValueError("give exactly one of name= or label_selector=")
        self.kind = kind
        self.name = name
        self.label_selector = label_selector
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
            self._hook = T9kHook(kubernetes_conn_id=self.kubernetes_conn_id, config_file=self.config_file,
                                 cluster_context=self.cluster_context, in_cluster=self.in_cluster)  # fmt: skip
        return self._hook

    @property
    def targets(self) -> tuple[str, ...]:
        return _phases(self.target_phases)

    def _namespace(self) -> str:
        return self.namespace or self.hook.get_namespace() or "default"

    def _job(self) -> dict | None:
        if self.name is not None:
            return self.hook.get_job(self.kind, self.name, self._namespace())
        found = self.hook.list_jobs(self.kind, self._namespace(), self.label_selector or "")
        if len(found) > 1:
            names = ", ".join(j["metadata"]["name"] for j in found)
            raise AirflowException(
                f"label selector {self.label_selector!r} matches {len(found)} jobs ({names}); it must match one"
            )
        return found[0] if found else None

    def poke(self, context: Any) -> bool:
        return self._check(self._job())

    def _check(self, job: dict | None) -> bool:
        state = interpret(job)
        self.log.info("%s %s: %s", self.kind, self.name or self.label_selector, state.summary())
        if job is None:
            return False
        if state.phase in self.targets:
            return True
        if state.phase in TERMINAL_PHASES:
            raise AirflowException(
                f"{self.kind} {job['metadata']['name']} ended {state.phase}, not in {self.targets}: {state.message}"
            )
        return False

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if self.label_selector is not None:
            try:
                parse_selector(self.label_selector)  # a bad one fails here, not in the triggerer
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
                job=JobRef(kind=self.kind, name=self.name or "", label_selector=self.label_selector, namespace=self._namespace()),
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

    def execute_complete(self, context: Any, event: dict) -> None:
        phase = event.get("phase")
        if phase in self.targets:
            return
        if event.get("status") == "timeout":
            raise AirflowSensorTimeout(f"{self.kind} {event.get('name')}: {event.get('message')} (wanted {self.targets})")
        raise AirflowException(f"{self.kind} {event.get('name')}: {event.get('message')} (wanted {self.targets})")
