"""Gauges read off the jobs in the controller's cache at each scrape, for the dashboard and the
alerts (deploy/chart/airflow-t9k/files): how long jobs wait Pending, how often their replicas
restarted, how many running jobs report progress.

Labels are the job's kind and namespace only (``job_namespace``, as metrics.py explains), never
its name: a series per namespace and kind, however many jobs run. A job's own numbers are in its
status (``kubectl get``, the T9k Jobs page).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

Obj = dict[str, Any]
Key = tuple[str, str]  # (kind, job_namespace)
LABELS = ["kind", "job_namespace"]


def _seconds(ts: Any) -> float | None:
    """A Kubernetes timestamp (``2026-12-01T10:00:00Z``) as Unix seconds; None when unreadable."""
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pending_since(job: Obj) -> float | None:
    """When the job became Pending (Unix seconds), None when it is not Pending.

    Its creation, or later where its Running condition turned False after it had run (a job
    evicted by Kueue waits in its queue again, reconcile/queueing.py): the condition's
    lastTransitionTime. A Running condition False from the first pass on is as old as the job.
    """
    status = job.get("status") or {}
    if status.get("phase") != "Pending":
        return None
    since = _seconds((job.get("metadata") or {}).get("creationTimestamp"))
    running = next((c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Running"), None)
    if running is not None and running.get("status") == "False":
        moved = _seconds(running.get("lastTransitionTime"))
        if moved is not None and (since is None or moved > since):
            since = moved
    return since


def replica_restarts(job: Obj) -> int:
    """Restarts of the job's replicas as its status counts them (``status.tasks[].restartCount``)."""
    total = 0
    for task in (job.get("status") or {}).get("tasks") or []:
        try:
            total += max(int(task.get("restartCount") or 0), 0)
        except (AttributeError, TypeError, ValueError):  # a status someone else wrote malformed
            continue
    return total


class JobGauges:
    """Fed every cached job of one scrape (``add``), then yields the families (``families``)."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.oldest_pending: dict[Key, float] = {}
        self.restarts: dict[Key, int] = {}
        self.reporting: dict[Key, int] = {}

    def add(self, kind: str, job: Obj) -> None:
        key = (kind, str((job.get("metadata") or {}).get("namespace") or ""))
        self.restarts[key] = self.restarts.get(key, 0) + replica_restarts(job)
        since = pending_since(job)
        if since is not None:
            waited = max(self.now - since, 0.0)
            self.oldest_pending[key] = max(self.oldest_pending.get(key, 0.0), waited)
        status = job.get("status") or {}
        if status.get("phase") == "Running":
            self.reporting.setdefault(key, 0)
            if isinstance(status.get("progress"), dict):
                self.reporting[key] += 1

    def families(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily("airflow_t9k_jobs_pending_oldest_seconds",
                                    "Seconds the longest-waiting Pending job of a kind in a namespace has waited "
                                    "(since its creation, or since it went back to its queue).", labels=LABELS)  # fmt: skip
        for key, waited in sorted(self.oldest_pending.items()):
            pending.add_metric(list(key), round(waited, 3))
        yield pending
        restarts = GaugeMetricFamily("airflow_t9k_jobs_replica_restarts",
                                     "Replica restarts counted in the statuses of the jobs in the cache (finished "
                                     "ones too, until they are deleted).", labels=LABELS)  # fmt: skip
        for key, n in sorted(self.restarts.items()):
            restarts.add_metric(list(key), n)
        yield restarts
        reporting = GaugeMetricFamily("airflow_t9k_jobs_reporting_progress",
                                      "Running jobs whose status carries progress (status.progress), of the running "
                                      "jobs of a kind in a namespace (0 where none reports).", labels=LABELS)  # fmt: skip
        for key, n in sorted(self.reporting.items()):
            reporting.add_metric(list(key), n)
        yield reporting
