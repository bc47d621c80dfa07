"""``T9kJobSensor``: wait for a job that already exists (by name, or by labels) to reach a phase."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from airflow.sdk import BaseSensorOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.outcome import TERMINAL_PHASES, interpret
from airflow_t9k.hooks.t9k import T9kHook
from airflow_t9k.triggers.job import T9kJobTrigger


class T9kJobSensor(BaseSensorOperator):
    """
    :param kind: the job kind
    :param name: the job's name; or give ``label_selector`` (exactly one job must match)
    :param namespace: its namespace
    :param target_phases: phases that end the wait successfully (default ``Succeeded``)
    :param deferrable: wait in the triggerer; a terminal phase outside the targets fails at once
    """

    template_fields: ClassVar[tuple[str, ...]] = ("name", "namespace", "label_selector")

    def __init__(
        self,
        *,
        kind: str,
        name: str | None = None,
        label_selector: str | None = None,
        namespace: str = "default",
        target_phases: tuple[str, ...] | list[str] = ("Succeeded",),
        kubernetes_conn_id: str | None = "kubernetes_default",
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (name is None) == (label_selector is None):
            raise ValueError("give exactly one of name= or label_selector=")
        self.kind = kind
        self.name = name
        self.label_selector = label_selector
        self.namespace = namespace
        self.target_phases = tuple(target_phases)
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deferrable = deferrable

    @property
    def hook(self) -> T9kHook:
        if getattr(self, "_hook", None) is None:
            self._hook = T9kHook(kubernetes_conn_id=self.kubernetes_conn_id)
        return self._hook

    def _job(self) -> dict | None:
        if self.name is not None:
            return self.hook.get_job(self.kind, self.name, self.namespace)
        found = self.hook.list_jobs(self.kind, self.namespace, self.label_selector or "")
        if len(found) > 1:
            names = ", ".join(j["metadata"]["name"] for j in found)
            raise AirflowException(f"label selector {self.label_selector!r} matches {len(found)} jobs ({names}); it must match one")
        return found[0] if found else None

    def poke(self, context: Any) -> bool:
        job = self._job()
        state = interpret(job)
        self.log.info("%s %s: %s", self.kind, self.name or self.label_selector, state.summary())
        if job is None:
            return False
        if state.phase in self.target_phases:
            return True
        if state.phase in TERMINAL_PHASES:
            raise AirflowException(f"{self.kind} {job['metadata']['name']} ended {state.phase}, not in {self.target_phases}: {state.message}")
        return False

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        job = self._job()
        if job is not None and self.poke(context):
            return None
        if job is None:  # wait for it to appear the ordinary way first
            return super().execute(context)
        self.defer(
            trigger=T9kJobTrigger(kind=self.kind, name=job["metadata"]["name"], namespace=self.namespace,
                                  uid=job["metadata"]["uid"], kubernetes_conn_id=self.kubernetes_conn_id, log_events=False),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )  # fmt: skip

    def execute_complete(self, context: Any, event: dict) -> None:
        phase = event.get("phase")
        if phase in self.target_phases:
            return
        raise AirflowException(f"{self.kind} {event.get('name')}: {event.get('message')} (wanted {self.target_phases})")
