"""The push path with a real replica on the real node (docs/progress.md, "The push path"): the
controller runs on the host and serves its endpoint on the bridge address pods reach
(10.88.0.1); the kubelet mounts the projected token and the CA; a Python loop calls
``airflow_t9k.progress.report`` (the helper from a ConfigMap: the image does not have the
package); the values reach status.progress while it runs and end as the program's last."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

import airflow_t9k.progress
from tests.real.support import on_real_node, py
from tests.support.push import push_flags

STEPS = 30
NODE_ADDRESS = "10.88.0.1"  # the bridge's gateway: where the real node's pods reach the host (docs/real-node.md)


def ensure_helper(core: client.CoreV1Api, namespace: str) -> None:
    data = {"__init__.py": "", "progress.py": Path(airflow_t9k.progress.__file__).read_text()}
    try:
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="helper"), data=data))
    except ApiException as exc:
        if exc.status != 409:
            raise


def test_a_real_replica_reports_with_the_helper_and_the_values_reach_the_status(jobs, controller_factory, real):
    _, flags = push_flags(host=NODE_ADDRESS, address=NODE_ADDRESS)
    controller = controller_factory("--progress-interval", "2", *flags)
    ensure_helper(jobs.core, jobs.ns)
    template = on_real_node({"spec": {
        "containers": [{"name": "main", "command": py("push_progress.py", str(STEPS), "0.4"),
                        "env": [{"name": "PYTHONPATH", "value": "/helper"}, {"name": "T9K_PROGRESS_MIN_INTERVAL", "value": "1"}],
                        "volumeMounts": [{"name": "helper", "mountPath": "/helper/airflow_t9k"}],
                        "resources": {"limits": {"cpu": "200m", "memory": "200Mi"}}}],
        "volumes": [{"name": "helper", "configMap": {"name": "helper"}}]}})  # fmt: skip
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "pushed"},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template}]}})  # fmt: skip
    seen: list[dict] = []
    w = watch.Watch()

    def follow() -> None:
        try:
            for ev in w.stream(jobs.api.list_namespaced_custom_object, "batch.tensorstack.dev", "v1beta1", jobs.ns,
                               "genericjobs", field_selector="metadata.name=pushed", timeout_seconds=240):  # fmt: skip
                p = (ev["object"].get("status") or {}).get("progress")
                if p and (not seen or seen[-1]["updated"] != p["updated"]):
                    seen.append(p)
        except Exception:  # noqa: BLE001, S110 - stopped
            pass

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    try:
        done = real.finished(jobs, "GenericJob", "pushed", ["pushed-worker-0"])
    finally:
        w.stop()
    log = real.log("pushed-worker-0")
    assert done["status"]["phase"] == "Succeeded", real.describe("pushed-worker-0")
    assert "airflow_t9k.progress" not in log, log  # no warning: every report was taken
    assert "T9K_PROGRESS" not in log  # so the values came by the push path, not the log
    p = done["status"]["progress"]
    loss, acc = round(2.0 * math.exp(-STEPS / 10), 4), round(1 - math.exp(-STEPS / 8), 4)
    assert (p["replica"], p["step"], p["totalSteps"], p["percent"], p["epoch"]) == ("pushed-worker-0", STEPS, STEPS, 100.0, 3), p
    assert p["metrics"] == {"loss": loss, "acc": acc}
    assert json.loads(done["status"]["tasks"][0]["status"][0]["containers"][0]["message"]) == {"acc": acc}  # the result agrees
    running = [s for s in seen if s["step"] < STEPS]
    assert len(running) >= 3, seen  # live while it ran (12 s at a write per 2 s at most)
    assert any(s.get("eta") for s in running), seen
    metrics = controller.metrics()
    assert metrics.get('airflow_t9k_progress_push_requests_total{code="200"}', 0) >= 3, metrics
    assert metrics.get("token_review", 0) == 1, metrics  # one token, checked once, then cached
