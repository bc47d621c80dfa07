"""Hang detection on the real node (issue 47, item 1): a real Python process reports, then blocks
(tests/real/programs/hang.py). The controller, following the kubelet's log, keeps the replicas'
last lines in ``<job>-evidence``, says ``Stalled``, and restarts every replica in its own pod
(counted: the program's next run sees ``T9K_RESTART_COUNT=1``), which reports again and succeeds;
a job with no restart left fails with reason ``ProgressDeadlineExceeded``. The same on kwok:
tests/integration/test_hang_detection.py; the time it takes: benchmarks/hang_detection.py."""

from __future__ import annotations

import json

from tests.real.support import on_real_node, py
from tests.support.cluster import wait_until

API = "batch.tensorstack.dev/v1beta1"
DEADLINE = 8
LIMITS = {"limits": {"cpu": "100m", "memory": "64Mi"}}


def hang_job(name: str, worker_0: list[str], policy: dict, strategy: str = "Recreate") -> dict:
    """Worker 0 runs ``worker_0`` and decides the job; worker 1 only waits, as a peer in the same
    collective would (its pod's name does not end in -0)."""
    script = 'case "$HOSTNAME" in *-0) exec "$@" ;; *) exec sleep 100000 ;; esac'
    container = {"name": "main", "command": ["sh", "-c", script, "sh", *worker_0], "resources": LIMITS}
    spec = {"progressDeadlineSeconds": DEADLINE, "restartStrategy": strategy, "successRules": [{"worker": [0]}],
            "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": policy,
                              "template": on_real_node({"spec": {"containers": [container]}})}]}  # fmt: skip
    meta = {"name": name, "annotations": {"batch.tensorstack.dev/evidence-log-lines": "20"}}
    return {"apiVersion": API, "kind": "GenericJob", "metadata": meta, "spec": spec}


def test_a_blocked_program_is_restarted_in_its_pods_and_goes_on(jobs, controller_factory, real):
    controller_factory("--progress-interval", "1", "--in-place-restarts", "on")
    jobs.create(hang_job("hr", py("hang.py", "4"), {"policy": "OnFailure", "limit": 2}, strategy="InPlace"))
    real.wait_log("hr-worker-0", "all-reduce 7: waiting for peers")
    uids = {n: p.metadata.uid for n, p in jobs.live_pods("hr").items()}
    stalled = wait_until(lambda: (c := jobs.condition("GenericJob", "hr", "Stalled")) and c["status"] == "True" and c,
                         timeout=DEADLINE + 30, what="Stalled")  # fmt: skip
    assert stalled["reason"] == "ProgressDeadlineExceeded"
    done = real.finished(jobs, "GenericJob", "hr", ["hr-worker-0", "hr-worker-1"], timeout=180)
    status = done["status"]
    said = json.dumps({k: status.get(k) for k in ("conditions", "restartHistory", "stall")}, indent=1)
    assert status["phase"] == "Succeeded", said + real.describe("hr-worker-0", "hr-worker-1")
    [entry] = status["restartHistory"]
    assert (entry["reason"], entry["counted"], entry.get("inPlace")) == ("ProgressDeadlineExceeded", True, True)
    c = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert (c["status"], c["reason"]) == ("False", "ProgressResumed"), c
    assert status["stall"]["counted"] == "hr-worker-0"
    log = real.log("hr-worker-0")
    assert "run 1" in log  # the second run saw its counted restart: the gate let it through once on record
    assert real.pod("hr-worker-0").metadata.uid == uids["hr-worker-0"]  # restarted in its own pod
    cm = jobs.core.read_namespaced_config_map("hr-evidence", jobs.ns)
    assert "all-reduce 7: waiting for peers" in cm.data["stall.hr-worker-0.txt"]  # the lines before the restart
    assert "stall.hr-worker-1.txt" in cm.data
    summary = json.loads(cm.data["stall.summary.json"])
    assert summary["stall"]["lastReplica"] == "hr-worker-0"
    assert set(summary["replicas"]) == {"hr-worker-0", "hr-worker-1"}


def test_a_blocked_program_with_no_restart_left_fails_the_job_after_its_evidence(jobs, controller_factory, real):
    controller_factory("--progress-interval", "1")
    jobs.create(hang_job("hf", py("hang.py", "3", "always"), {"policy": "Never"}))
    real.wait_log("hf-worker-0", "all-reduce 7: waiting for peers")
    done = real.finished(jobs, "GenericJob", "hf", ["hf-worker-0", "hf-worker-1"], timeout=DEADLINE + 90)
    status = done["status"]
    assert status["phase"] == "Failed", real.describe("hf-worker-0")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ProgressDeadlineExceeded"
    assert "restarts no failure" in failed["message"]
    assert "restartHistory" not in status
    wait_until(lambda: jobs.live_pods("hf") == {}, timeout=60, what="clean-up after the evidence")
    cm = jobs.core.read_namespaced_config_map("hf-evidence", jobs.ns)
    assert "all-reduce 7: waiting for peers" in cm.data["stall.hf-worker-0.txt"]
    assert "all-reduce 7: waiting for peers" in cm.data["hf-worker-0.log"]  # the end's part too
    assert cm.metadata.annotations["batch.tensorstack.dev/evidence-final"] == "true"
