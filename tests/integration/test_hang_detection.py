"""Hang detection (issue 47, item 1) against the real API server: kwok replicas "print"
T9K_PROGRESS lines (kwok serves every pod's log from the test namespace's pod-log file), then stop.
The controller keeps their last lines in ``<job>-evidence``, says ``Stalled``, restarts every
replica (counted, reason ``ProgressDeadlineExceeded``), clears ``Stalled`` on the next report, and
fails the job once no restart is left. The same with a real program that reports, then blocks:
tests/real/test_hang_detection_real.py. The pure decisions: tests/unit/controller/steps/test_stall.py."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from airflow.sdk.exceptions import TaskDeferred

from tests.integration.test_operator_trigger import conn, first_event, make_op  # noqa: F401 - fixtures
from tests.integration.test_progress import append_log, report
from tests.support.cluster import wait_until
from tests.support.task import context

GJ = "GenericJob"
DEADLINE = 8  # progressDeadlineSeconds of these jobs: past the recreation of two kwok pods after a restart
SLACK = 15  # a pass, the evidence's ConfigMap and its watch event, on a busy 2-core machine


def stalled(jobs, name: str) -> dict | None:
    c = jobs.condition(GJ, name, "Stalled")
    return c if c and c["status"] == "True" else None


def hung_job(name: str, limit: int) -> dict:
    """Two replicas that run until deleted (no sim duration), restarted on failure ``limit`` times."""
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ,
        "metadata": {"name": name, "annotations": {"batch.tensorstack.dev/evidence-log-lines": "20"}},
        "spec": {"progressDeadlineSeconds": DEADLINE,
                 "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "OnFailure", "limit": limit},
                                   "template": {"spec": {"containers": [{"name": "main", "image": "busybox",
                                                                         "command": ["train"]}]}}}]},
    }  # fmt: skip


def reported(jobs, name: str, step: int) -> bool:
    return ((jobs.get(GJ, name).get("status") or {}).get("progress") or {}).get("step") == step


def test_a_job_whose_progress_stops_is_restarted_then_failed_once_no_restart_is_left(cluster, jobs, controller_factory):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    controller = controller_factory("--progress-interval", "1")
    jobs.create(hung_job("hang", limit=1))
    jobs.wait_phase(GJ, "hang", "Running")
    wait_until(lambda: controller.metrics().get("progress_stream_open", 0) >= 1, timeout=20, what="the log followed")
    time.sleep(0.5)
    append_log(cluster, jobs.ns, report(10), "all-reduce 7 started")
    wait_until(lambda: reported(jobs, "hang", 10), timeout=15, what="the report in status")
    last_report = time.monotonic()
    first_uids = {n: p.metadata.uid for n, p in jobs.live_pods("hang").items()}

    # Silence: evidence first, Stalled on record, then every replica restarts (counted once).
    c = wait_until(lambda: stalled(jobs, "hang"), timeout=DEADLINE + SLACK, what="Stalled")
    took = time.monotonic() - last_report
    assert DEADLINE - 2 <= took <= DEADLINE + SLACK, took  # report stamps are whole seconds
    assert c["reason"] == "ProgressDeadlineExceeded"
    assert "from replica hang-worker-0" in c["message"]
    wait_until(lambda: jobs.get(GJ, "hang")["status"].get("restartHistory") or [], timeout=SLACK, what="the restart")
    status = jobs.get(GJ, "hang")["status"]
    [entry] = status["restartHistory"]
    assert (entry["reason"], entry["counted"], entry["replica"]) == (
        "ProgressDeadlineExceeded",
        True,
        "hang-worker-0 (whole group)",
    )
    assert status["stall"]["action"] == "Restart"
    assert status["phase"] == "Running"
    cm = jobs.core.read_namespaced_config_map("hang-evidence", jobs.ns)
    assert cm.metadata.annotations["batch.tensorstack.dev/evidence-stall"] == status["stall"]["key"]
    summary = json.loads(cm.data["stall.summary.json"])
    assert summary["stall"]["lastReplica"] == "hang-worker-0"
    assert {n: r["phase"] for n, r in summary["replicas"].items()} == {"hang-worker-0": "Running", "hang-worker-1": "Running"}
    assert "all-reduce 7 started" in cm.data["stall.hang-worker-0.txt"]  # the last lines before the restart
    assert "hang-worker-0.log" not in cm.data  # not taken for a finished replica's record
    assert "Stalled" in [e["reason"] for e in json.loads(cm.data["stall.events.json"])]
    jobs.reasons("hang", "Stalled", "StallRestarting")
    wait_until(lambda: len(jobs.live_pods("hang")) == 2 and not set(first_uids.values()) & {
        p.metadata.uid for p in jobs.live_pods("hang").values()}, timeout=30, what="the replicas recreated")  # fmt: skip
    restarts = {e["name"]: e["restartCount"] for t in jobs.get(GJ, "hang")["status"]["tasks"] for e in t["status"]}
    assert restarts == {"hang-worker-0": 1, "hang-worker-1": 0}

    # A report after the restart clears Stalled.
    wait_until(lambda: jobs.phase(GJ, "hang") == "Running" and all(
        (p.status.phase == "Running") for p in jobs.live_pods("hang").values()), timeout=30, what="running again")  # fmt: skip
    time.sleep(1.5)  # the new pod's stream opens from its start
    append_log(cluster, jobs.ns, report(20))
    wait_until(lambda: (jobs.condition(GJ, "hang", "Stalled") or {}).get("status") == "False", timeout=SLACK,
               what="Stalled cleared")  # fmt: skip
    assert jobs.condition(GJ, "hang", "Stalled")["reason"] == "ProgressResumed"

    # Silent again: worker-0 has used its one restart, so the job fails, after its evidence.
    failed = jobs.wait_phase(GJ, "hang", "Failed", timeout=DEADLINE + 2 * SLACK)
    cond = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "ProgressDeadlineExceeded"
    assert "replica hang-worker-0 has used its 1 restart(s)" in cond["message"]
    assert len(failed["status"]["restartHistory"]) == 1
    wait_until(lambda: jobs.live_pods("hang") == {}, timeout=60, what="clean-up (Unfinished) after the evidence")
    cm = jobs.core.read_namespaced_config_map("hang-evidence", jobs.ns)
    notes = cm.metadata.annotations
    assert notes["batch.tensorstack.dev/evidence-final"] == "true"
    assert notes["batch.tensorstack.dev/evidence-stall"] == failed["status"]["stall"]["key"]
    assert json.loads(cm.data["summary.json"])["phase"] == "Failed"  # the end's part beside the stall's
    assert "hang-worker-0.log" in cm.data
    assert "stall.hang-worker-0.txt" in cm.data


def test_a_job_that_never_reports_is_never_judged_and_costs_no_write(cluster, jobs, controller_factory):
    controller = controller_factory("--progress-interval", "1")
    jobs.create(hung_job("quiet", limit=3))
    jobs.wait_phase(GJ, "quiet", "Running")
    time.sleep(3)  # the last detail write (--coalesce-status) done
    writes = controller.metrics().get("status_write", 0)
    time.sleep(DEADLINE * 2)
    assert jobs.condition(GJ, "quiet", "Stalled") is None
    assert "stall" not in jobs.get(GJ, "quiet")["status"]
    assert controller.metrics().get("status_write", 0) == writes  # nothing written while it runs quietly


@pytest.mark.asyncio
async def test_the_deferred_task_log_shows_the_stall_and_the_failure(conn, cluster, jobs, controller_factory, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    controller = controller_factory("--progress-interval", "1")
    ctx = context()
    op = make_op(deferrable=True, log_events=False, progress_deadline=DEADLINE)  # restart policy Never: no restart
    with pytest.raises(TaskDeferred) as exc:
        op.execute(ctx)
    trigger = exc.value.trigger
    task = asyncio.create_task(first_event(trigger))
    await asyncio.to_thread(jobs.wait_phase, GJ, trigger.name, "Running")
    while controller.metrics().get("progress_stream_open", 0) < 1:  # noqa: ASYNC110 - another process's /metrics
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.5)
    append_log(cluster, jobs.ns, report(30))
    event = (await asyncio.wait_for(task, DEADLINE + 3 * SLACK)).payload
    assert event["status"] == "failed"
    assert event["state"]["reason"] == "ProgressDeadlineExceeded"
    out = capsys.readouterr().out
    assert f"GenericJob {jobs.ns}/{trigger.name}: stalled: No replica reported progress for {DEADLINE}s" in out
    assert "then failing the job" in out
