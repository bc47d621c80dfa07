"""The gauges read off the cached jobs (controller/metrics_jobs.py): Pending age, replica
restarts, jobs reporting progress; labelled by kind and namespace only, as a scrape shows them."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from prometheus_client import generate_latest

from airflow_t9k.controller.metrics_jobs import JobGauges, pending_since, replica_restarts
from tests.support.controller import parse_metrics
from tests.unit.controller.test_metrics_and_probes import offline_controller

CREATED = "2026-12-01T10:00:00Z"
T0 = datetime(2026, 12, 1, 10, tzinfo=timezone.utc).timestamp()


def job(name: str = "j", ns: str = "ns", created: str | None = CREATED, **status) -> dict:
    meta = {"name": name, "namespace": ns, "uid": f"uid-{name}"}
    if created is not None:
        meta["creationTimestamp"] = created
    return {"kind": "GenericJob", "metadata": meta, "status": status}


def running(state: str, at: str) -> dict:
    return {"type": "Running", "status": state, "reason": "Queued", "lastTransitionTime": at}


@pytest.mark.parametrize(
    ("obj", "since"),
    [
        pytest.param(job(phase="Pending"), T0, id="pending-since-creation"),
        pytest.param(job(phase="Pending", conditions=[running("False", "2026-12-01T10:00:01Z")]), T0 + 1,
                     id="queued-at-first-pass"),
        pytest.param(job(phase="Pending", conditions=[running("False", "2026-12-01T11:00:00Z")]), T0 + 3600,
                     id="back-in-its-queue-after-an-eviction"),
        pytest.param(job(phase="Pending", conditions=[running("True", "2026-12-01T11:00:00Z")]), T0,
                     id="a-true-running-condition-moves-nothing"),
        pytest.param(job(phase="Pending", conditions=[running("False", "not a time")]), T0, id="unreadable-transition"),
        pytest.param(job(created=None, phase="Pending"), None, id="no-creation-time"),
        pytest.param(job(phase="Running"), None, id="running"),
        pytest.param(job(), None, id="no-phase-yet"),
    ],
)  # fmt: skip
def test_pending_since(obj, since):
    assert pending_since(obj) == since


@pytest.mark.parametrize(
    ("tasks", "restarts"),
    [
        ([], 0),
        ([{"type": "worker", "restartCount": 2}, {"type": "master", "restartCount": 1}], 3),
        ([{"type": "worker"}], 0),
        ([{"type": "worker", "restartCount": "x"}, "junk", {"type": "m", "restartCount": -4}, {"restartCount": 5}], 5),
    ],
)
def test_replica_restarts(tasks, restarts):
    assert replica_restarts(job(tasks=tasks)) == restarts


def test_one_series_per_kind_and_namespace_with_the_oldest_wait():
    gauges = JobGauges(now=T0 + 2000)
    gauges.add("GenericJob", job("a", phase="Pending"))  # waited 2000 s
    gauges.add("GenericJob", job("b", phase="Pending", conditions=[running("False", "2026-12-01T10:30:00Z")]))  # 200 s
    gauges.add("GenericJob", job("c", ns="other", phase="Running", progress={"step": 3}, tasks=[{"restartCount": 2}]))
    gauges.add("GenericJob", job("d", ns="other", phase="Running"))
    gauges.add("MPIJob", job("e", phase="Succeeded", tasks=[{"restartCount": 1}]))
    gauges.add("MPIJob", job("f", created="2026-12-01T11:00:00Z", phase="Pending"))  # created after `now`: 0, not < 0
    got = {f.name: {tuple(s.labels.values()): s.value for s in f.samples} for f in gauges.families()}
    assert got == {
        "airflow_t9k_jobs_pending_oldest_seconds": {("GenericJob", "ns"): 2000.0, ("MPIJob", "ns"): 0.0},
        "airflow_t9k_jobs_replica_restarts": {("GenericJob", "ns"): 0, ("GenericJob", "other"): 2, ("MPIJob", "ns"): 1},
        "airflow_t9k_jobs_reporting_progress": {("GenericJob", "other"): 1},
    }


@pytest.mark.asyncio
async def test_the_scrape_shows_them_for_the_cached_jobs():
    controller = offline_controller()
    cache = controller.informers[("GenericJob", "ns")].cache
    cache[("ns", "a")] = job("a", phase="Pending", created="2000-01-01T00:00:00Z")
    cache[("ns", "b")] = job("b", phase="Running", progress={"step": 1}, tasks=[{"restartCount": 4}])
    metrics = parse_metrics(generate_latest(controller.instruments.registry).decode())
    assert metrics['airflow_t9k_jobs_pending_oldest_seconds{job_namespace="ns",kind="GenericJob"}'] > 26 * 365 * 86400
    assert metrics['airflow_t9k_jobs_replica_restarts{job_namespace="ns",kind="GenericJob"}'] == 4
    assert metrics['airflow_t9k_jobs_reporting_progress{job_namespace="ns",kind="GenericJob"}'] == 1
    assert metrics['airflow_t9k_jobs{kind="GenericJob",phase="Pending"}'] == 1
    await controller.kube.close()
