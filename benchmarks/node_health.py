"""Bad nodes avoided (docs/disruptions.md, "Bad nodes avoided"; not part of the tests): what watching
the nodes costs while their status churns and nothing turns unhealthy, and how long a node that
turns unhealthy takes to reach every job with a replica on it.

    scripts/local-cluster.sh up
    .venv/bin/python benchmarks/node_health.py [--jobs 200] [--nodes 4] [--seconds 60] [--churn 0.5]

On kwok: NODES kwok nodes of the benchmark's own and JOBS one-replica GenericJobs spread over them,
one controller with ``--unhealthy-node-condition label:bench.t9k.test/health=bad``.

1. **Quiet**: SECONDS with nothing happening: the controller's API requests and passes (the floor).
2. **Churn**: SECONDS while every node's status is rewritten every CHURN seconds (a condition whose
   message changes, as heartbeats and node-problem-detector rewrite them): API requests and passes
   beyond the floor, per job. Nothing turned unhealthy, so the goal is none.
3. **A node turns unhealthy** (the label): from the label's write to the moment each job with a
   replica there shows the node in ``status.avoidedNodes`` (a watch of the jobs), p50/p99/max;
   and the passes it took, against the jobs on that node.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench import DEFAULT_KUBECONFIG, Cluster, Ours, Watch, machine, pct, table, wait_for
from hang_detection import controller_counts

GROUP, VERSION, PLURAL = "batch.tensorstack.dev", "v1beta1", "genericjobs"
JOBS_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/{{ns}}/{PLURAL}"
POOL = "bench.t9k.test/pool"
HEALTH = "bench.t9k.test/health"


def node(name: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok-bench", POOL: pool}},
            "spec": {"taints": [{"key": POOL, "value": pool, "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "500"},
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"}}}  # fmt: skip


def job(name: str, pool: str) -> dict[str, Any]:
    spec = {"containers": [{"name": "main", "image": "busybox"}], "nodeSelector": {POOL: pool},
            "tolerations": [{"key": POOL, "operator": "Exists", "effect": "NoSchedule"}]}  # fmt: skip
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "restartPolicy": {"policy": "OnFailure", "limit": 3},
                                       "template": {"spec": spec}}]}}  # fmt: skip


def patch(cluster: Cluster, path: str, body: dict[str, Any]) -> None:
    """A strategic merge patch: a node's conditions merge by type, so Ready stays as kwok keeps it."""
    r = cluster.session.request("PATCH", cluster.server + path, data=json.dumps(body), timeout=60,
                                headers={"Content-Type": "application/strategic-merge-patch+json"})  # fmt: skip
    if r.status_code != 200:
        raise RuntimeError(f"PATCH {path}: {r.status_code} {r.text[:300]}")


def churn(cluster: Cluster, names: list[str], seconds: float, every: float) -> int:
    """Rewrite every node's status condition ``BenchNoise`` until ``seconds`` pass; the writes made."""
    writes, t0, n = 0, time.monotonic(), 0
    while time.monotonic() < t0 + seconds:
        n += 1
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for name in names:
            cond = {"type": "BenchNoise", "status": "False", "reason": "Quiet", "message": f"beat {n}",
                    "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}  # fmt: skip
            patch(cluster, f"/api/v1/nodes/{name}/status", {"status": {"conditions": [cond]}})
            writes += 1
        time.sleep(every)
    return writes


class Avoided:
    """When each job was first seen with ``node`` in its status.avoidedNodes (arrival time)."""

    def __init__(self, node_name: str) -> None:
        self.node = node_name
        self.seen: dict[str, float] = {}
        self.lock = threading.Lock()

    def on_event(self, kind: str, obj: dict, _: float) -> None:
        arrival = time.monotonic()
        entries = (obj.get("status") or {}).get("avoidedNodes") or []
        if any(e.get("node") == self.node for e in entries):
            with self.lock:
                self.seen.setdefault(obj["metadata"]["name"], arrival)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--churn", type=float, default=0.5, help="seconds between two rewrites of every node's status")
    parser.add_argument("--kubeconfig", default=str(DEFAULT_KUBECONFIG))
    args = parser.parse_args()
    cluster = Cluster(args.kubeconfig)
    pool = f"bn-{uuid.uuid4().hex[:5]}"
    ns = f"bench-nodes-{pool}"
    names = [f"{pool}-{i}" for i in range(args.nodes)]
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    # No log followed (--progress-interval 0): kwok replicas print nothing, and their streams'
    # requests would hide what the nodes cost.
    flags = ("--unhealthy-node-condition", f"label:{HEALTH}=bad", "--progress-interval", "0")
    ctrl = Ours(cluster, ns, log_dir, kind="GenericJob", extra=flags)
    watch = None
    try:
        for n in names:
            cluster.request("POST", "/api/v1/nodes", node(n, pool))
        cluster.create_namespace(ns)
        ctrl.start()
        cluster.post_all([(JOBS_PATH.format(ns=ns), job(f"j{i}", pool)) for i in range(args.jobs)])

        def placed() -> dict[str, str]:
            pods = cluster.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            return {p["metadata"]["name"].removesuffix("-worker-0"): p["spec"].get("nodeName") for p in pods
                    if (p.get("status") or {}).get("phase") == "Running"}  # fmt: skip

        wait_for("every replica Running", lambda: len(placed()) == args.jobs, 600, 1)
        time.sleep(5)  # the last passes and status writes settle
        on_node = placed()
        target = max(names, key=lambda n: sum(1 for v in on_node.values() if v == n))
        there = sorted(j for j, n in on_node.items() if n == target)

        r0, p0 = controller_counts(ctrl)
        time.sleep(args.seconds)
        r1, p1 = controller_counts(ctrl)
        writes = churn(cluster, names, args.seconds, args.churn)
        r2, p2 = controller_counts(ctrl)

        avoided = Avoided(target)
        watch = Watch(cluster, JOBS_PATH.format(ns=ns), avoided.on_event)
        time.sleep(1)
        t0 = time.monotonic()
        patch(cluster, f"/api/v1/nodes/{target}", {"metadata": {"labels": {HEALTH: "bad"}}})
        wait_for("every job on the node", lambda: len(avoided.seen) >= len(there), 300, 0.2)
        time.sleep(3)
        r3, p3 = controller_counts(ctrl)
        late = sorted(set(avoided.seen) - set(there))
    finally:
        if watch is not None:
            watch.stop()
        ctrl.stop()
        cluster.delete_namespace(ns, wait=False)
        for n in names:
            cluster.request("DELETE", f"/api/v1/nodes/{n}", ok=(200, 202, 404))
    delays = [avoided.seen[j] - t0 for j in there]
    n = args.jobs
    head = (f"{machine()}; {n} one-replica GenericJobs on {args.nodes} kwok nodes, {args.seconds:.0f} s a phase; "
            f"churn: every node's status rewritten every {args.churn:g} s ({writes} writes)")  # fmt: skip
    print(head + "\n")
    print(table(["phase", "controller API requests", "per job", "passes", "per job"], [
        ["quiet", r1 - r0, (r1 - r0) / n, p1 - p0, (p1 - p0) / n],
        ["node status churn", r2 - r1, (r2 - r1) / n, p2 - p1, (p2 - p1) / n],
        [f"node {target} labelled unhealthy ({len(there)} jobs there)", r3 - r2, (r3 - r2) / n, p3 - p2, (p3 - p2) / n],
    ]))  # fmt: skip
    print()
    row = ["every job with a replica there", len(there), pct(delays, 50), pct(delays, 99), max(delays), len(late)]
    print(table(["from the label's write to the node in status.avoidedNodes", "jobs", "p50 s", "p99 s", "max s",
                 "jobs elsewhere that listed it"], [row]))  # fmt: skip


if __name__ == "__main__":
    main()
