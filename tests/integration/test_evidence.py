"""Evidence survives clean-up (issue 23, point 3), against the real API server: a failed job with
``cleanUpPolicy: All`` loses its pods, and its ConfigMap ``<job>-evidence`` keeps what they said."""

from __future__ import annotations

import json

from tests.support.cluster import wait_until


def test_a_cleaned_up_job_keeps_its_replicas_logs_exit_codes_and_events(jobs, controller):
    annotations = {"sim.t9k.test/duration": "2s", "sim.t9k.test/fail-pods": "-worker-0$", "sim.t9k.test/exit-code": "3",
                   "sim.t9k.test/message": "loss is nan at step 812"}  # fmt: skip
    jobs.create({
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob",
        "metadata": {"name": "ev", "annotations": {"batch.tensorstack.dev/evidence-log-lines": "20"}},
        "spec": {"cleanUpPolicy": "All", "failureRules": [{"worker": [0]}], "successRules": [{"worker": [0, 1]}],
                 "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "Never"},
                                   "template": {"metadata": {"annotations": annotations},
                                                "spec": {"containers": [{"name": "main", "image": "busybox",
                                                                         "command": ["train"]}]}}}]},
    })  # fmt: skip
    jobs.wait_phase("GenericJob", "ev", "Failed", timeout=60)
    wait_until(lambda: jobs.live_pods("ev") == {}, timeout=60, what="pods cleaned up")
    cm = jobs.core.read_namespaced_config_map("ev-evidence", jobs.ns)
    assert cm.metadata.owner_references[0].name == "ev"
    summary = json.loads(cm.data["summary.json"])
    assert summary["phase"] == "Failed"
    assert summary["rootCause"]["replica"] == "ev-worker-0"
    [container] = summary["replicas"]["ev-worker-0"]["containers"]
    assert (container["exitCode"], container["message"]) == (3, "loss is nan at step 812")
    assert summary["replicas"]["ev-worker-1"]["phase"] in ("Running", "Succeeded")
    for p in ("ev-worker-0", "ev-worker-1"):  # kwok's shared log file, read through the API server, its last 20 lines
        lines = cm.data[f"{p}.log"].splitlines()
        assert 0 < len(lines) <= 20, lines
        assert not lines[0].startswith("(the log could not be read"), lines
    reasons = [e["reason"] for e in json.loads(cm.data["events.json"])]
    assert "Failed" in reasons
