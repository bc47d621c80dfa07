"""A real kubelet evicts a replica (issue 23, point 1): the job goes on, no restart spent.

The replica fills an ``emptyDir`` past its ``sizeLimit``; the kubelet's eviction manager fails
the pod with reason ``Evicted`` within its 10 s monitoring period. A marker on a host
directory lets the replacement see it is the second run and finish.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tests.real.support import on_real_node

API = "batch.tensorstack.dev/v1beta1"
SCRIPT = (
    "if [ -e /marker/evicted-once ]; then echo second run after the eviction; exit 0; fi; "
    "touch /marker/evicted-once; echo filling the scratch volume; head -c 4194304 /dev/zero > /scratch/big; sleep 300"
)


def test_a_real_kubelet_eviction_is_replaced_without_spending_a_restart(jobs, controller, real):
    marker = Path(tempfile.mkdtemp(prefix="t9k-evict-"))
    try:
        container = {
            "name": "main",
            "command": ["sh", "-c", SCRIPT],
            "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}, {"name": "marker", "mountPath": "/marker"}],
        }
        template = on_real_node(
            {
                "spec": {
                    "containers": [container],
                    "volumes": [
                        {"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}},
                        {"name": "marker", "hostPath": {"path": str(marker), "type": "Directory"}},
                    ],
                }
            }
        )
        jobs.create({"apiVersion": API, "kind": "GenericJob", "metadata": {"name": "evicted"},
                     "spec": {"successRules": [{"worker": [0]}], "failureRules": [{"worker": [0]}],
                              "replicaSpecs": [{"type": "worker", "replicas": 1, "restartPolicy": {"policy": "Never"},
                                                "template": template}]}})  # fmt: skip
        done = real.finished(jobs, "GenericJob", "evicted", ["evicted-worker-0"], timeout=180)
        status = done["status"]
        assert status["phase"] == "Succeeded", real.describe("evicted-worker-0")
        [entry] = status["restartHistory"]
        assert entry["replica"] == "evicted-worker-0"
        assert entry["counted"] is False
        assert entry["cause"].startswith("Evicted: Usage of EmptyDir volume"), entry
        assert [e["restartCount"] for t in status["tasks"] for e in t["status"]] == [0]
        assert "second run after the eviction" in real.log("evicted-worker-0")
    finally:
        shutil.rmtree(marker, ignore_errors=True)
