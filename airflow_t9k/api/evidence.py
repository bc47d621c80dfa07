"""The evidence record the controller keeps before clean-up deletes a finished job's pods: the
ConfigMap ``<job>-evidence`` (controller/reconcile/evidence.py). Read by the task (the failed
replicas' kept log lines, when their pods are gone) and by the UI.

Anyone who may create ConfigMaps in the namespace could create one of that name first, with an
ownerReference naming the job (a uid is no secret), so a record is used only when its uid is
the one the job's status has on record as created by the controller (api/ownership.py). Pure:
the hooks do the reading.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_t9k.api import ownership

Obj = dict[str, Any]
EVIDENCE_SUFFIX = "-evidence"
LOG_SUFFIX = ".log"
KEPT_LOG_BYTES = 16 * 1024  # the controller keeps at most this much per replica; read no more


def evidence_name(job_name: str) -> str:
    return f"{job_name}{EVIDENCE_SUFFIX}"


def is_evidence_of(configmap: Obj | None, job: Obj) -> bool:
    """Whether ``configmap`` is the evidence record the controller made for ``job``: its uid is
    the one on record in the job's status (a pre-made one, whatever its ownerReferences, is not)."""
    meta = (configmap or {}).get("metadata") or {}
    name = evidence_name(str(((job.get("metadata") or {}).get("name")) or ""))
    recorded = ownership.recorded_uid(job.get("status"), "ConfigMap", name)
    return recorded is not None and meta.get("uid") == recorded and meta.get("name") == name


def controlled_by(obj: Obj | None, uid: str | None) -> bool:
    """Whether ``obj``'s controller (its ownerReference with ``controller: true``) is the object
    with ``uid``: how the evidence ConfigMap the controller wrote differs from one of the same
    name a co-tenant created."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(isinstance(r, dict) and r.get("uid") == uid and r.get("controller") is True for r in refs)


def kept_logs(configmap: Obj | None, job: Obj) -> dict[str, str]:
    """pod -> its kept log lines, from ``job``'s own evidence ConfigMap; empty for none, or for
    one the controller did not make for the job (a forged one is ignored, not trusted)."""
    if not is_evidence_of(configmap, job):
        return {}
    data = (configmap or {}).get("data") or {}
    return {k[: -len(LOG_SUFFIX)]: v[-KEPT_LOG_BYTES:] for k, v in data.items()
            if k.endswith(LOG_SUFFIX) and isinstance(v, str)}  # fmt: skip


def last_lines(text: str, lines: int | None) -> str:
    """The last ``lines`` lines of ``text`` (None: all of them)."""
    if lines is None:
        return text
    return "".join(text.splitlines(keepends=True)[-lines:]) if lines > 0 else ""


class KeptLogs:
    """The failed replicas' lines the controller kept in the job's evidence ConfigMap, read once
    and only when a pod's log cannot be read; used only when its uid is on record in the job's status."""

    def __init__(self, job: Obj, log: logging.Logger) -> None:
        self.job, self.log = job, log
        self.logs: dict[str, str] | None = None
        self.name = evidence_name(job["metadata"]["name"])

    def take(self, configmap: Obj | None) -> None:
        self.logs = kept_logs(configmap, self.job)
        if configmap is not None and not self.logs and not is_evidence_of(configmap, self.job):
            self.log.warning("ConfigMap %s is not this job's evidence record (the job's status has not its uid on record "
                             "as made by the controller); ignored", self.name)  # fmt: skip

    def failed_to_read(self, exc: Exception) -> None:
        self.log.warning("could not read the evidence record %s: %s", self.name, exc)
        self.logs = {}

    def lookup(self, pod: str, text: str) -> tuple[str, str | None]:
        if self.logs is None:
            raise RuntimeError("lookup() before take() or failed_to_read()")
        if pod in self.logs:
            return self.logs[pod], self.name
        return text or f"(log not available: the pod is gone and {self.name} kept no lines of it)", None

    def instead(self, pod: str, text: str, fetch: Any) -> tuple[str, str | None]:
        """(text, the record's name) of ``pod`` from the evidence; else ``text`` as read."""
        if self.logs is None:
            try:
                self.take(fetch())
            except Exception as exc:  # noqa: BLE001 - no access, unreachable: the task log says so
                self.failed_to_read(exc)
        return self.lookup(pod, text)
