"""Live progress and metrics (issue 24, point 2) against the real API server: kwok replicas
"print" T9K_PROGRESS lines (kwok serves every pod's log from the test namespace's pod-log file),
the controller follows the deciding replica's log and writes status.progress, rate-limited;
``kubectl get`` shows it; the operator's task log shows it and XCom ``metrics`` has the last
values. The same with a real program on the real node: tests/real/test_progress_real.py; in
the T9k Job tab: tests/integration/test_ui.py."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from datetime import datetime, timezone

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kubernetes import watch

from tests.integration.test_operator_trigger import conn, first_event, make_op  # noqa: F401 - fixtures
from tests.support.cluster import wait_until
from tests.support.task import Store, context

GJ = "GenericJob"
INTERVAL = 2  # --progress-interval of these tests' controller


def append_log(cluster, namespace: str, *lines: str) -> None:
    """As if every kwok pod of ``namespace`` printed these lines now (LocalCluster.own_pod_log)."""
    # A stamp of its own per line, as a real log has: followers resume after the last stamp they saw.
    cluster.print_to_pods(namespace, "".join(f"{datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')} stdout F {line}\n"
                                             for line in lines))  # fmt: skip


def report(step: int) -> str:
    return "T9K_PROGRESS " + json.dumps({"step": step, "total_steps": 200, "epoch": step // 50, "loss": round(2 / (step + 1), 4),
                                         "metrics": {"acc": round(step / 250, 4)}})  # fmt: skip


def table(jobs, name: str) -> dict[str, object]:
    """The row ``kubectl get genericjob NAME`` prints: the server's Table, column name -> cell."""
    r = jobs.api.api_client.call_api(
        f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{jobs.ns}/genericjobs/{name}", "GET",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}, auth_settings=["BearerToken"],
        _preload_content=False,
    )  # fmt: skip
    out = json.loads(r.data)
    return dict(zip([c["name"] for c in out["columnDefinitions"]], out["rows"][0]["cells"], strict=True))


class ProgressWrites:
    """Every status.progress a watch of the job saw: (phase, updated, step)."""

    def __init__(self, jobs, name: str) -> None:
        self.seen: list[tuple[str, str, int]] = []
        self.w = watch.Watch()
        self.thread = threading.Thread(target=self._run, args=(jobs, name), daemon=True)
        self.thread.start()

    def _run(self, jobs, name: str) -> None:
        try:
            for ev in self.w.stream(jobs.api.list_namespaced_custom_object, "batch.tensorstack.dev", "v1beta1", jobs.ns,
                                    "genericjobs", field_selector=f"metadata.name={name}", timeout_seconds=120):  # fmt: skip
                status = ev["object"].get("status") or {}
                p = status.get("progress")
                if p and (not self.seen or self.seen[-1][1] != p["updated"]):
                    self.seen.append((status.get("phase"), p["updated"], p.get("step")))
        except Exception:  # noqa: BLE001, S110 - stopped: the connection is cut
            pass

    def stop(self) -> None:
        self.w.stop()


def test_progress_reaches_status_kubectl_the_task_log_and_xcom(conn, cluster, jobs, controller_factory, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    controller = controller_factory("--progress-interval", str(INTERVAL))
    store = Store()
    ctx = context(store)
    op = make_op(sim={"sim.t9k.test/duration": "16s"}, deferrable=False, log_events=False,
                 tensorboard_url="http://tensorboard.example/#{namespace}/{name}")  # fmt: skip
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(op.execute(ctx)), daemon=True)
    worker.start()
    wait_until(lambda: "t9k_job" in store, timeout=30, what="the job submitted")
    name = store["t9k_job"]["name"]
    writes = ProgressWrites(jobs, name)
    try:
        jobs.wait_phase(GJ, name, "Running")
        wait_until(lambda: controller.metrics().get("progress_stream_open", 0) >= 1, timeout=20, what="the log followed")
        time.sleep(0.5)
        for step in range(10, 130, 10):  # 12 reports over 6 s, and garbage between them
            append_log(cluster, jobs.ns, report(step), "T9K_PROGRESS {not json", "epoch done")
            time.sleep(0.5)
        wait_until(lambda: (jobs.get(GJ, name).get("status") or {}).get("progress", {}).get("step") == 120,
                   timeout=INTERVAL + 10, what="the last report in status")  # fmt: skip
        p = jobs.get(GJ, name)["status"]["progress"]
        assert (p["replica"], p["totalSteps"], p["epoch"], p["percent"], p["summary"]) == (
            f"{name}-worker-0",
            200,
            2,
            60.0,
            "60% 120/200",
        )
        assert p["metrics"] == {"loss": round(2 / 121, 4), "acc": 0.48}
        assert p["eta"], p
        assert 0 < p["etaSeconds"] < 60, p  # ~20 steps/s measured, 80 to go
        assert 2 <= len(p["history"]["points"]) <= 50
        assert p["history"]["points"][-1]["step"] == 120
        assert len(json.dumps(p)) < 8192
        row = table(jobs, name)
        assert row["Progress"] == "60% 120/200", row
        assert row["ETA"] == p["eta"], row
        append_log(cluster, jobs.ns, report(200))  # the last line before the end
        jobs.wait_phase(GJ, name, "Succeeded", timeout=40)
        worker.join(60)
    finally:
        writes.stop()
    assert outcome
    assert outcome[0]["phase"] == "Succeeded"
    final = jobs.get(GJ, name)["status"]["progress"]
    assert (final["step"], final["percent"], final["metrics"]["acc"]) == (200, 100.0, 0.8)
    assert "eta" not in final
    # Rate-limited: writes while it ran at least INTERVAL apart (the pass that ends the job takes the latest at once).
    stamps = [datetime.fromisoformat(u.replace("Z", "+00:00")) for phase, u, _ in writes.seen if phase == "Running"]
    assert len(stamps) >= 2, writes.seen
    assert all((b - a).total_seconds() >= INTERVAL for a, b in itertools.pairwise(stamps)), writes.seen
    assert len(writes.seen) <= 12, writes.seen  # 13 reports and garbage; far fewer writes
    assert controller.metrics()["progress_line_ignored"] >= 12
    # XCom metrics beside the result; the task log shows the lines and the progress as it changed
    assert ctx["ti"].xcom["metrics"] == {"step": 200, "total_steps": 200, "epoch": 4, "loss": round(2 / 201, 4), "acc": 0.8}
    assert ctx["ti"].xcom["_link_TensorBoardLink"] == f"http://tensorboard.example/#{jobs.ns}/{name}"
    out = capsys.readouterr().out
    assert f"[{name}-worker-0] {report(120)}" in out  # the replica's own line, as it printed it
    assert f"GenericJob {name}: progress step " in out  # a summary line as status.progress changed
    assert f"GenericJob {name} reported last: step 200/200 (100%), epoch 4" in out


@pytest.mark.parametrize("http2", ["auto", "off"])
@pytest.mark.asyncio
async def test_the_deferred_wait_logs_the_progress_and_its_event_carries_the_metrics(
    conn, cluster, jobs, controller_factory, capsys, http2
):
    """Followed over HTTP/2, which the API server agrees to (a stream on a shared connection),
    and over HTTP/1.1 (a connection of its own)."""
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    controller = controller_factory("--progress-interval", str(INTERVAL), "--progress-http2", http2)
    ctx = context()
    op = make_op(sim={"sim.t9k.test/duration": "10s"}, deferrable=True, log_events=False)
    with pytest.raises(TaskDeferred) as exc:
        op.execute(ctx)
    trigger = exc.value.trigger
    task = asyncio.create_task(first_event(trigger))
    await asyncio.to_thread(jobs.wait_phase, GJ, trigger.name, "Running")
    while controller.metrics().get("progress_stream_open", 0) < 1:  # noqa: ASYNC110 - another process's /metrics
        await asyncio.sleep(0.2)
    for step in (50, 100, 150):
        await asyncio.sleep(0.6)
        append_log(cluster, jobs.ns, report(step))
    event = (await task).payload
    assert event["status"] == "success"
    assert event["state"]["metrics"] == {"step": 150, "total_steps": 200, "epoch": 3, "loss": round(2 / 151, 4), "acc": 0.6}
    assert event["state"]["progress"].startswith("step 150/200 (75%), epoch 3")
    op.execute_complete(ctx, event)
    assert ctx["ti"].xcom["metrics"]["step"] == 150
    out = capsys.readouterr().out
    assert f"GenericJob {jobs.ns}/{trigger.name}: progress step " in out  # the trigger's line in the task log
    opened = "replica logs: an HTTP/2 connection opened, up to 100 streams on it" in controller.log_path.read_text()
    assert opened == (http2 == "auto")


def test_the_printer_columns_are_empty_without_progress(jobs, controller):
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": "quiet"},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {
                     "metadata": {"annotations": {"sim.t9k.test/duration": "1s"}},
                     "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]}})  # fmt: skip
    jobs.wait_phase(GJ, "quiet", "Succeeded")
    row = table(jobs, "quiet")
    assert (row["Phase"], row["Progress"], row["ETA"]) == ("Succeeded", None, None), row
    assert "progress" not in jobs.get(GJ, "quiet")["status"]
