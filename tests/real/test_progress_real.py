"""Live progress from a real program on the real node (docs/progress.md): a Python training
loop prints T9K_PROGRESS lines; the controller follows the kubelet's log of the deciding
replica and keeps status.progress; the values match what the program printed last and its
termination message (the job's result)."""

from __future__ import annotations

import json
import math
import threading

from kubernetes import watch

from tests.real.support import on_real_node, py

STEPS = 30


def test_a_real_programs_progress_lines_reach_the_status(jobs, controller_factory, real):
    controller_factory("--progress-interval", "2")
    template = on_real_node({"spec": {"containers": [{"name": "main", "command": py("progress.py", str(STEPS), "0.4"),
                                                      "resources": {"limits": {"cpu": "200m",
                                                                               "memory": "200Mi"}}}]}})  # fmt: skip
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "prog"},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template}]}})  # fmt: skip
    seen: list[dict] = []
    w = watch.Watch()

    def follow() -> None:
        try:
            for ev in w.stream(jobs.api.list_namespaced_custom_object, "batch.tensorstack.dev", "v1beta1", jobs.ns,
                               "genericjobs", field_selector="metadata.name=prog", timeout_seconds=240):  # fmt: skip
                p = (ev["object"].get("status") or {}).get("progress")
                if p and (not seen or seen[-1]["updated"] != p["updated"]):
                    seen.append(p)
        except Exception:  # noqa: BLE001, S110 - stopped
            pass

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    try:
        done = real.finished(jobs, "GenericJob", "prog", ["prog-worker-0"])
    finally:
        w.stop()
    assert done["status"]["phase"] == "Succeeded", real.describe("prog-worker-0")
    p = done["status"]["progress"]
    loss, acc = round(2.0 * math.exp(-STEPS / 10), 4), round(1 - math.exp(-STEPS / 8), 4)
    assert (p["replica"], p["step"], p["totalSteps"], p["percent"], p["epoch"]) == ("prog-worker-0", STEPS, STEPS, 100.0, 3), p
    assert p["metrics"] == {"loss": loss, "acc": acc}
    assert json.loads(done["status"]["tasks"][0]["status"][0]["containers"][0]["message"]) == {"acc": acc}  # the result agrees
    running = [s for s in seen if s["step"] < STEPS]
    assert len(running) >= 3, seen  # live while it ran (12 s at a write per 2 s at most)
    assert any(s.get("eta") for s in running), seen
    assert 3 <= len(p["history"]["points"]) <= 50
    assert p["history"]["points"][-1]["step"] == STEPS
    assert "T9K_PROGRESS step=oops" in real.log("prog-worker-0")
