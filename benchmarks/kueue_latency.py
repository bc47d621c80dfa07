"""Job create -> first pod created, with and without Kueue admission (not part of the tests).

    scripts/local-cluster.sh kueue up        # Kueue on the running local cluster
    .venv/bin/python benchmarks/kueue_latency.py [--jobs 30]

Two fresh namespaces, one controller watching both (``--queueing=auto``): in ``queued`` a
LocalQueue (of a ClusterQueue with room for every job) makes each job go through a Workload
and Kueue's admission before its pod; in ``direct`` there is no LocalQueue, so the same job
gets its pod at once, as without Kueue. Jobs are created one at a time (GenericJob, one
1-GPU replica), each after the previous one's first pod was seen, so the numbers are latency,
not throughput. Times are when the pod's watch event arrives here, from just before the POST.

    .venv/bin/python benchmarks/kueue_latency.py --through 200 --quota 20

instead sends 200 jobs at once through a ClusterQueue that fits 20 (one GPU each, each pod
running 2 s): total time against the sum of the jobs' run times, and the most GPU pods alive
at once (pending or running, from a pod LIST every 0.25 s), which must never exceed the quota.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench import KUEUE, Cluster, Ours, Watch, kueue_queues, machine, median, pct, table


def job(name: str, duration: str = "1s") -> dict:
    gpu = {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"scheduler": {"t9kScheduler": {"queue": "bench"}}, "replicaSpecs": [{
                "type": "worker", "replicas": 1,
                "template": {"metadata": {"annotations": {"sim.t9k.test/duration": duration}},
                             "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["true"],
                                                      "resources": {"requests": gpu, "limits": gpu}}]}}}]}}  # fmt: skip


def measure(cluster: Cluster, ns: str, n: int) -> list[float]:
    first_pod: dict[str, float] = {}
    seen = threading.Condition()

    def on_pod(kind: str, pod: dict, t: float) -> None:
        owner = (pod["metadata"].get("labels") or {}).get("batch.tensorstack.dev/job-name")
        if kind == "ADDED" and owner:
            with seen:
                first_pod.setdefault(owner, t)
                seen.notify_all()

    watch = Watch(cluster, f"/api/v1/namespaces/{ns}/pods", on_pod)
    delays = []
    try:
        for i in range(n):
            name = f"lat-{i}"
            t0 = time.monotonic()
            cluster.request("POST", f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{ns}/genericjobs", job(name))
            with seen:
                if not seen.wait_for(lambda name=name: name in first_pod, timeout=60):
                    raise SystemExit(f"{ns}/{name}: no pod within 60 s")
            delays.append(first_pod[name] - t0)
    finally:
        watch.stop()
    return delays


def through(cluster: Cluster, ns: str, n: int, quota: int) -> None:
    """Polled, not watched: a watch that ends (an API server restart) would lose the count."""
    from datetime import datetime

    def stamp(v: str) -> float:
        return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()

    peak, samples = 0, 0
    t0 = time.monotonic()
    cluster.post_all([(f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{ns}/genericjobs", job(f"thr-{i}", "2s"))
                      for i in range(n)])  # fmt: skip
    while True:
        pods = cluster.get(f"/api/v1/namespaces/{ns}/pods")["items"]
        peak = max(peak, sum((p.get("status") or {}).get("phase") in (None, "Pending", "Running") for p in pods))
        samples += 1
        done = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        if len(done) >= n:
            break
        if time.monotonic() - t0 > 1800:
            raise SystemExit(f"only {len(done)} of {n} pods ended within 30 minutes")
        time.sleep(0.25)
    total = time.monotonic() - t0
    runs = []
    for p in done:
        term = (((p["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("terminated")) or {}
        started = p["status"].get("startTime")  # kwok stamps the container's startedAt at its end
        if started and term.get("finishedAt"):
            runs.append(stamp(term["finishedAt"]) - stamp(started))
    print(f"{n} jobs through a quota of {quota} GPUs (1 GPU, 2 s each); {machine()}")
    print(table(["total s", "sum of run times s", "ideal s (sum / quota)", "most GPU pods alive at once", "samples", "quota"],
                [[total, sum(runs), sum(runs) / quota, peak, samples, quota]]))  # fmt: skip
    if peak > quota:
        raise SystemExit(f"quota exceeded: {peak} pods alive at once > {quota}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--through", type=int, default=0, help="send this many jobs at once instead")
    parser.add_argument("--quota", type=int, default=20, help="GPUs of the ClusterQueue with --through")
    args = parser.parse_args()
    cluster = Cluster()
    if "workloads" not in {r["name"] for r in cluster.get(KUEUE).get("resources", [])}:
        raise SystemExit("Kueue's API is not served: scripts/local-cluster.sh kueue up")
    tag = uuid.uuid4().hex[:6]
    queued, direct, cq = f"bench-kq-{tag}", f"bench-direct-{tag}", f"bench-{tag}"
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    for ns in (queued, direct):
        cluster.create_namespace(ns)
    gpus = args.quota if args.through else args.jobs + 10
    quota = [("cpu", "1000"), ("memory", "1000Gi"), ("nvidia.com/gpu", str(gpus))]
    kueue_queues(cluster, queued, cq, quota)
    ours = Ours(cluster, queued, log_dir, kind="GenericJob", extra=("-n", direct))
    ours.start()
    try:
        if args.through:
            through(cluster, queued, args.through, args.quota)
            return
        results = {}
        for label, ns in (("direct (no Kueue)", direct), ("queued (Kueue admits)", queued)):
            results[label] = measure(cluster, ns, args.jobs)
    finally:
        ours.stop()
        cluster.request("DELETE", f"{KUEUE}/clusterqueues/{cq}", ok=(200, 202, 404))
        for ns in (queued, direct):
            cluster.delete_namespace(ns, wait=False)
    print(f"job create -> first pod, {args.jobs} jobs one at a time; {machine()}")
    print(table(["path", "median s", "p99 s", "max s"],
                [[k, median(v), pct(v, 99), max(v)] for k, v in results.items()]))  # fmt: skip


if __name__ == "__main__":
    main()
