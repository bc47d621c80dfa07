"""GPU-hours (issue 24, point 3) against the real API server: what a job records it used is
checked against its pods' own start and finish times as the API served them.

The replica asks for 2 nvidia.com/gpu (kwok nodes have 8). Its first attempt is failed the way
a kubelet reports it (``pods/status``) after a few seconds, so the controller restarts it; the
second attempt runs for ``sim.t9k.test/duration`` and kwok ends it Succeeded.
"""

from __future__ import annotations

import time
from datetime import datetime

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated

GJ = "GenericJob"
GPUS = 2


def gjob(name: str) -> dict:
    spec = {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                            "resources": {"limits": {"nvidia.com/gpu": str(GPUS), "cpu": "500m"}}}]}  # fmt: skip
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ,
        "metadata": {"name": name, "annotations": {"airflow-t9k.io/dag-id": "nightly_retrain"}},
        "spec": {"successRules": [{"worker": [0]}], "failureRules": [], "runPolicy": {"cleanUpPolicy": "None"},
                 "replicaSpecs": [{"type": "worker", "replicas": 1, "restartPolicy": {"policy": "OnFailure", "limit": 1},
                                   "template": {"metadata": {"annotations": {"sim.t9k.test/duration": "6s"}}, "spec": spec}}]},
    }  # fmt: skip


def seconds(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()


def running_since(jobs, pod: str, not_uid: str | None = None):
    """(uid, container startedAt) of the replica's pod once it runs (another pod than ``not_uid``)."""

    def check():
        p = jobs.live_pods("use").get(pod)
        if p is None or p.metadata.uid == not_uid or not p.status.container_statuses:
            return None
        state = p.status.container_statuses[0].state
        return (p.metadata.uid, state.running.started_at) if state.running and state.running.started_at else None

    return wait_until(check, timeout=60, what=f"{pod} running")


def first_run(jobs) -> tuple[str, datetime]:
    """The first pod's uid and start, once the controller has it on record and it ran 2 s."""
    uid, started = running_since(jobs, "use-worker-0")
    wait_until(lambda: "usage" in (jobs.get(GJ, "use").get("status") or {}), timeout=30, what="the run on record")
    time.sleep(2)  # a run long enough that its figures are not zeros
    return uid, started


def replacement_ran(jobs, not_uid: str) -> tuple[datetime, datetime, dict]:
    """The replacement's start and finish as the API served them, and the job's status at its end."""
    uid, started = running_since(jobs, "use-worker-0", not_uid=not_uid)
    jobs.wait_phase(GJ, "use", "Succeeded", timeout=60)
    pod = jobs.pods("use")["use-worker-0"]
    assert pod.metadata.uid == uid
    return started, pod.status.container_statuses[0].state.terminated.finished_at, jobs.get(GJ, "use")["status"]


def test_usage_matches_the_pods_run_times_and_counts_the_restarts_waste(jobs, controller):
    jobs.create(gjob("use"))
    uid1, s1 = first_run(jobs)
    failed = set_pod_terminated(jobs.core, jobs.ns, "use-worker-0", phase="Failed", exit_code=1)
    t = failed.status.container_statuses[0].state.terminated
    assert t.started_at == s1  # the kubelet-style write keeps the run's start
    f1 = t.finished_at
    s2, f2, status = replacement_ran(jobs, not_uid=uid1)
    usage = status["usage"]
    first, second = seconds(s1, f1), seconds(s2, f2)
    assert first >= 2
    assert second >= 5
    assert usage["accelerators"] == {"nvidia.com/gpu": GPUS * (first + second)}
    assert usage["wasted"] == {"nvidia.com/gpu": GPUS * first}  # the failed attempt, restarted
    assert usage["cpuSeconds"] == 0.5 * (first + second)
    assert usage["runs"] == 2
    start = datetime.fromisoformat(status["startTime"].replace("Z", "+00:00"))
    assert seconds(start, f2) <= usage["wallSeconds"] <= seconds(start, f2) + 15  # to the pass that saw the end
    assert usage["open"] == {}
    assert [e["podUID"] for e in status["restartHistory"]] == [uid1]
    # Prometheus, once, by namespace and DAG
    labels = {"job_namespace": jobs.ns, "dag_id": "nightly_retrain"}
    wait_until(lambda: controller.metric_sum("airflow_t9k_jobs_finished_total", **labels, phase="Succeeded") == 1,
               timeout=10, what="the finished job counted")  # fmt: skip
    assert controller.metric_sum("airflow_t9k_job_accelerator_seconds_total", **labels) == GPUS * (first + second)
    assert controller.metric_sum("airflow_t9k_job_wasted_accelerator_seconds_total", **labels) == GPUS * first


def test_an_evicted_runs_usage_is_counted_as_waste(jobs, controller):
    """A disruption through the Eviction API: the evicted pod has no finish time of its own (it is
    deleted while it runs), so its run counts to the pass that saw it go: between the eviction
    and the replacement's start. The replacement's run is exact."""
    from kubernetes import client

    manifest = gjob("use")
    manifest["spec"]["replicaSpecs"][0]["restartPolicy"] = {"policy": "Never"}
    jobs.create(manifest)
    uid1, s1 = first_run(jobs)
    evicted_at = datetime.now(s1.tzinfo)
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="use-worker-0", namespace=jobs.ns))
    jobs.core.create_namespaced_pod_eviction("use-worker-0", jobs.ns, body)
    s2, f2, status = replacement_ran(jobs, not_uid=uid1)
    usage = status["usage"]
    wasted = usage["wasted"]["nvidia.com/gpu"]
    assert GPUS * (int(seconds(s1, evicted_at)) - 1) <= wasted <= GPUS * (seconds(s1, s2) + 1)
    assert usage["accelerators"]["nvidia.com/gpu"] - wasted == GPUS * seconds(s2, f2)  # the replacement, exact
    assert seconds(s2, f2) >= 5
    assert usage["runs"] == 2
    assert [(e["podUID"], e["counted"]) for e in status["restartHistory"]] == [(uid1, False)]
