"""Prometheus metrics under the names controller-runtime users already have dashboards for.

controller_runtime_reconcile_*, workqueue_*, rest_client_requests_total and
leader_election_master_status mean what they mean for a Go controller; our own counters
(``airflow_t9k_controller_total{what=...}``, read by the benchmarks and tests) stay as they were.

Reconcile outcomes are read off the work queue the way client-go's contract defines them
(``forget`` after a pass that worked, ``add_rate_limited`` after one that failed, a plain
re-add otherwise), so the metrics stay out of the workers' retry logic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Gauge, GCCollector, Histogram, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from airflow_t9k.api.outcome import interpret
from airflow_t9k.controller.metrics_jobs import JobGauges
from airflow_t9k.controller.queue import WorkQueue
from airflow_t9k.k8s.client import Kube

if TYPE_CHECKING:
    from airflow_t9k.controller.runner import Controller

Obj = dict[str, Any]
DAG_ID_ANNOTATION = "airflow-t9k.io/dag-id"  # set by the operator on every job it submits
CONTROLLER = "t9kjob"  # the controller label: one controller reconciles every job kind
QUEUE = "t9kjob"
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}  # writes, as RBAC names them
# controller-runtime's reconcile buckets, to a minute.
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
                     0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15,
                     20, 25, 30, 40, 50, 60)  # fmt: skip
QUEUE_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)  # client-go's


class NotLeader(Exception):
    """A write refused because this replica's lease may have passed to another."""


class Metrics:
    """One registry per controller process (tests may build several in one interpreter)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        # process_resident_memory_bytes, open fds, CPU; python_gc_*, python_info: what a dashboard
        # and an OOM alert read of any Prometheus target.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.reconcile_total = Counter("controller_runtime_reconcile_total", "Reconciliations by result.",
                                       ["controller", "result"], registry=r)  # fmt: skip
        self.reconcile_errors = Counter("controller_runtime_reconcile_errors_total", "Reconciliations that failed.",
                                        ["controller"], registry=r)  # fmt: skip
        self.reconcile_time = Histogram("controller_runtime_reconcile_time_seconds", "Time per reconciliation.",
                                        ["controller"], buckets=RECONCILE_BUCKETS, registry=r)  # fmt: skip
        self.active_workers = Gauge("controller_runtime_active_workers", "Workers reconciling right now.",
                                    ["controller"], registry=r)  # fmt: skip
        self.max_workers = Gauge("controller_runtime_max_concurrent_reconciles", "Workers configured.",
                                 ["controller"], registry=r)  # fmt: skip
        self.queue_adds = Counter("workqueue_adds_total", "Keys added to the work queue.", ["name"], registry=r)
        self.queue_retries = Counter("workqueue_retries_total", "Keys re-added after a failure.", ["name"], registry=r)
        self.queue_wait = Histogram("workqueue_queue_duration_seconds", "Time a key waits before a worker takes it.",
                                    ["name"], buckets=QUEUE_BUCKETS, registry=r)  # fmt: skip
        self.work_time = Histogram("workqueue_work_duration_seconds", "Time a worker spends on a key.",
                                   ["name"], buckets=QUEUE_BUCKETS, registry=r)  # fmt: skip
        self.requests = Counter("rest_client_requests_total", "API requests by status code, method and host.",
                                ["code", "method", "host"], registry=r)  # fmt: skip
        self.writes = Counter("airflow_t9k_api_writes_total", "Successful API writes by verb and resource.",
                              ["verb", "resource"], registry=r)  # fmt: skip
        self.fenced = Counter("airflow_t9k_leader_fenced_writes_total",
                              "Writes refused because this replica's leadership had lapsed.", registry=r)  # fmt: skip
        self.leader = Gauge("leader_election_master_status", "1 while this replica holds the lease.", ["name"], registry=r)
        # What finished jobs used (status.usage, docs/usage.md), once per job, when its end is written.
        # job_namespace, not namespace: the Prometheus Operator gives every scraped series the
        # target's own namespace label and would rename ours to exported_namespace.
        by = ["job_namespace", "dag_id"]
        self.jobs_finished = Counter("airflow_t9k_jobs_finished_total", "Jobs that ended, by phase.", [*by, "phase"], registry=r)
        self.accelerator_seconds = Counter("airflow_t9k_job_accelerator_seconds_total",
                                           "Accelerator-seconds finished jobs used, by resource name.",
                                           [*by, "resource"], registry=r)  # fmt: skip
        self.wasted_seconds = Counter("airflow_t9k_job_wasted_accelerator_seconds_total",
                                      "Accelerator-seconds of runs that ended in a restart or a disruption.",
                                      [*by, "resource"], registry=r)  # fmt: skip
        self.cpu_seconds = Counter(  # what the replicas were allowed (limits) for as long as they ran, not measured use
            "airflow_t9k_job_cpu_limit_seconds_total", "CPU limit-seconds of finished jobs: their replicas' CPU limits "
            "times how long they ran (not the CPU they used).", by, registry=r
        )  # fmt: skip
        self.wall_seconds = Counter(
            "airflow_t9k_job_wall_seconds_total", "Wall time of finished jobs, start to end.", by, registry=r
        )

    def job_finished(self, job: Obj) -> None:
        """Count a job whose end was just written (the executor calls this once per job)."""
        meta = job.get("metadata") or {}
        labels = (str(meta.get("namespace") or ""), str((meta.get("annotations") or {}).get(DAG_ID_ANNOTATION) or ""))
        state = interpret(job)
        self.jobs_finished.labels(*labels, str(state.phase)).inc()
        usage = state.usage
        for resource, seconds in (usage.get("accelerator_seconds") or {}).items():
            self.accelerator_seconds.labels(*labels, resource).inc(max(float(seconds), 0.0))
        for resource, seconds in (usage.get("wasted_accelerator_seconds") or {}).items():
            self.wasted_seconds.labels(*labels, resource).inc(max(float(seconds), 0.0))
        self.cpu_seconds.labels(*labels).inc(max(float(usage.get("cpu_seconds") or 0), 0.0))
        self.wall_seconds.labels(*labels).inc(max(float(usage.get("wall_seconds") or 0), 0.0))

    def bind(self, controller: Controller) -> None:
        """Publish what the controller already counts and knows (its own counters, queue, watches)."""
        self.max_workers.labels(CONTROLLER).set(controller.settings.workers)
        self.registry.register(_ControllerCollector(controller))

    def queue(self) -> TimedQueue:
        return TimedQueue(self)


def push_code(what: str) -> str | None:
    """The HTTP status a push counter counts (``progress_push``: 200, ``progress_push_429``: 429); None for others."""
    if what == "progress_push":
        return "200"
    rest = what.removeprefix("progress_push_")
    return rest if rest != what and rest.isdigit() and len(rest) == 3 else None


class _ControllerCollector(Collector):
    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def collect(self) -> Iterator[Metric]:
        c = self.controller
        own = CounterMetricFamily("airflow_t9k_controller", "What the controller did, by what.", labels=["what"])
        # The progress endpoint's answers by HTTP status: a family of their own, the code a label
        # (not a `what` value per code, which no dashboard can sum or alert on by class).
        pushes = CounterMetricFamily("airflow_t9k_progress_push_requests", "Reports the progress endpoint answered, by "
                                     "HTTP status code.", labels=["code"])  # fmt: skip
        for what, value in sorted(c.metrics.items()):
            code = push_code(what)
            if code is not None:
                pushes.add_metric([code], value)
            else:
                own.add_metric([what], value)
        yield own
        yield pushes
        yield GaugeMetricFamily("airflow_t9k_controller_queue_depth", "Jobs waiting for a worker.", value=len(c.queue))
        depth = GaugeMetricFamily("workqueue_depth", "Keys waiting in the work queue.", labels=["name"])
        depth.add_metric([QUEUE], len(c.queue))
        yield depth
        healthy = GaugeMetricFamily("airflow_t9k_informer_healthy", "1 while the watch is open and synced.",
                                    labels=["kind", "watched_namespace"])  # fmt: skip
        for (kind, ns), informer in sorted(c.informers.items()):
            healthy.add_metric([kind, ns], float(informer.synced.is_set() and informer.healthy))
        yield healthy
        jobs = GaugeMetricFamily("airflow_t9k_jobs", "Jobs in the controller's cache, by kind and phase.",
                                 labels=["kind", "phase"])  # fmt: skip
        counts: dict[tuple[str, str], int] = {}
        gauges = JobGauges(time.time())
        for (kind, _ns), informer in c.informers.items():
            if kind in c.settings.kinds:
                for job in informer.cache.values():
                    key = (kind, str(((job.get("status") or {}).get("phase")) or "Unknown"))
                    counts[key] = counts.get(key, 0) + 1
                    gauges.add(kind, job)
        for (kind, phase), n in sorted(counts.items()):
            jobs.add_metric([kind, phase], n)
        yield jobs
        yield from gauges.families()


class TimedQueue(WorkQueue):
    """The work queue, timed: wait from first add to a worker, work from get to done."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self.m = metrics
        self._added_at: dict[Hashable, float] = {}
        self._started: dict[Hashable, float] = {}
        self._outcome: dict[Hashable, str] = {}

    def restart_waits(self) -> None:
        """Keys queued while this replica stood by waited for the lease, not for a worker."""
        now = time.monotonic()
        self._added_at = dict.fromkeys(self._added_at, now)

    def add(self, key: Hashable, urgent: bool = True) -> None:
        self.m.queue_adds.labels(QUEUE).inc()
        self._added_at.setdefault(key, time.monotonic())
        super().add(key, urgent)

    def add_rate_limited(self, key: Hashable) -> float:
        self.m.queue_retries.labels(QUEUE).inc()
        if key in self._started:
            self._outcome[key] = "error"
        return super().add_rate_limited(key)

    def forget(self, key: Hashable) -> None:
        if key in self._started:
            self._outcome[key] = "success"
        super().forget(key)

    async def get(self) -> Hashable:
        key = await super().get()
        now = time.monotonic()
        self.m.queue_wait.labels(QUEUE).observe(now - self._added_at.pop(key, now))
        self._started[key] = now
        self.m.active_workers.labels(CONTROLLER).inc()
        return key

    def done(self, key: Hashable) -> None:
        started = self._started.pop(key, None)
        if started is not None:
            took = time.monotonic() - started
            self.m.work_time.labels(QUEUE).observe(took)
            self.m.reconcile_time.labels(CONTROLLER).observe(took)
            self.m.active_workers.labels(CONTROLLER).dec()
            result = self._outcome.pop(key, "requeue")
            self.m.reconcile_total.labels(CONTROLLER, result).inc()
            if result == "error":
                self.m.reconcile_errors.labels(CONTROLLER).inc()
        super().done(key)


def resource_of(path: str) -> str:
    """The resource (with its subresource) an API path names: pods, genericjobs/status, leases."""
    parts = [p for p in urlsplit(path).path.split("/") if p]
    # /api/v1/... or /apis/<group>/<version>/...
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else parts
    if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] not in ("status", "finalize"):
        parts = parts[2:]  # namespaces/<ns>/<resource>...; namespaces/<name>[/status] is a namespace
    if not parts:
        return "unknown"
    return parts[0] if len(parts) < 3 else f"{parts[0]}/{parts[2]}"


def _dry_run(query: dict[str, Any] | None) -> bool:
    return bool(query and query.get("dryRun"))


class InstrumentedKube(Kube):
    """The Kube client, counting every request, and refusing writes while ``fence`` says no.

    The fence is checked right before each write is sent, so a replica that wakes up after
    its lease lapsed (a paused process, a partition) cannot send anything before it notices.
    """

    def __init__(self, api: Any, metrics: Metrics, fence: Callable[[], bool] | None = None) -> None:
        super().__init__(api)
        self.m = metrics
        self.fence = fence
        self.host = urlsplit(self.transport.host).netloc or "unknown"

    async def _send(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        # A dry run (the feature probes at start, controller/features.py) changes nothing: it is
        # neither fenced nor counted as a write, so a standby that probes has written nothing.
        verb = None if _dry_run(kwargs.get("query")) else VERBS.get(method.upper())
        if verb and self.fence is not None and not self.fence():
            self.m.fenced.inc()
            raise NotLeader(f"not the leader any more: {method} {path} not sent")
        try:
            resp = await super()._send(method, path, *args, **kwargs)
        except Exception:
            self.m.requests.labels("<error>", method.upper(), self.host).inc()
            raise
        self.m.requests.labels(str(resp.status), method.upper(), self.host).inc()
        if verb and 200 <= resp.status <= 299:
            self.m.writes.labels(verb, resource_of(path)).inc()
        return resp
