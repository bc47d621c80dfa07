"""How our controller grows: N PyTorchTrainingJobs x 4 replicas for N = 100, 500, 1000, 2000.

    scripts/local-cluster.sh up
    .venv/bin/pip install -e '.[bench]'          # matplotlib, for --plot
    .venv/bin/python benchmarks/scaling.py --jobs 100 500 1000 2000 --plot docs/images/benchmarks-scaling.png

Each N in a fresh namespace with a fresh controller (`airflow-t9k controller --kind
PyTorchTrainingJob -n NS`). Printed per N: submission time, first submission -> every job
Running, peak RSS and CPU of the controller, and the delay from each pod turning terminal to
its job's next status write (p50/p99), all from watch events as they arrive here.

Capacity: the local cluster's kwok nodes hold 500 pods each. When N x 4 exceeds what the Ready
kwok nodes offer, the script adds fake nodes `kwok-bench-<i>` (1,000 pods each; kwok manages
every node, so no restart is needed) and deletes them at the end (`--no-extra-nodes` refuses
instead).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (
    ROOT,
    Cluster,
    Ours,
    Recorder,
    Watch,
    cpu_seconds,
    machine,
    pct,
    peak_rss_mb,
    pod_capacity,
    table,
    three_panels,
    wait_for,
)  # fmt: skip
from vs_kubeflow import T9K, t9k_job, t9k_state


def top_costs(raw: Path, limit: int = 15) -> str:
    """py-spy's collapsed stacks summed by function: own samples (leaf) and inclusive samples."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0].rsplit("/", 1)[-1] + ")" if " (" in f else f
                  for f in stack.split(";")]  # fmt: skip
        total += int(count)
        own[frames[-1]] += int(count)
        for f in set(frames):
            incl[f] += int(count)
    rows = [[f, 100 * c / total, 100 * incl[f] / total] for f, c in own.most_common(limit)]
    rows2 = [[f, 100 * c / total] for f, c in incl.most_common(limit + 25)
             if not f.startswith(("<module>", "run (", "_run_once", "run_forever", "run_until_complete",
                                  "main ("))][:limit]  # fmt: skip
    return (
        f"{total} samples (100 Hz, the thread holding the GIL)\n\n"
        + table(["function (own time)", "own %", "inclusive %"], rows)
        + "\n\n"
        + table(["function (inclusive)", "inclusive %"], rows2)
    )


def run(cluster: Cluster, n: int, log_dir: Path, timeout: float, profile: Path | None = None) -> dict:
    ns = f"scale-{n}-{uuid.uuid4().hex[:5]}"
    cluster.create_namespace(ns)
    g, v, p = T9K
    rec = Recorder(t9k_state)
    ctrl = Ours(cluster, ns, log_dir)
    try:
        pid = ctrl.start()
        spy = None
        if profile:
            spy = subprocess.Popen([str(ROOT / ".venv" / "bin" / "py-spy"), "record", "--pid", str(pid), "--rate", "100",
                                    "--format", "raw", "--output", str(profile), "--gil"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            time.sleep(1)
        watches = [Watch(cluster, f"/api/v1/namespaces/{ns}/pods", rec.on_pod),
                   Watch(cluster, f"/apis/{g}/{v}/namespaces/{ns}/{p}", rec.on_job)]  # fmt: skip
        cpu0 = cpu_seconds(pid)
        first, last = cluster.post_all([(f"/apis/{g}/{v}/namespaces/{ns}/{p}", t9k_job(f"j{i}")) for i in range(n)])
        running = wait_for(f"N={n}: every job Running", lambda: len(rec.job_running) >= n, timeout, 0.1)
        rss_running = peak_rss_mb(pid)
        wait_for(f"N={n}: every job ended", lambda: len(rec.job_done) >= n and len(rec.pod_terminal) >= 4 * n, timeout, 0.25)
        time.sleep(2)
        cpu, rss = cpu_seconds(pid) - cpu0, peak_rss_mb(pid)
        own = ctrl.metrics()
        for w in watches:
            w.stop()
        if spy:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
    finally:
        ctrl.stop()
        cluster.delete_namespace(ns)
    delays = rec.pod_end_to_status()
    return {
        "n": n, "submit_s": last - first, "running_from_first_s": max(rec.job_running.values()) - first,
        "running_wait_s": running - first, "pods_exist_s": max(rec.pod_created.values()) - first,
        "rss_mb": rss, "rss_running_mb": rss_running, "cpu_s": cpu,
        "p50_ms": 1000 * pct(delays, 50), "p99_ms": 1000 * pct(delays, 99), "max_ms": 1000 * max(delays),
        "delays": len(delays), "status_writes_per_job": own.get("status_write", 0) / n,
        "failed": sum(1 for x in rec.job_done_phase.values() if x != "Succeeded"),
    }  # fmt: skip


def plot(results: list[dict], path: Path) -> None:
    ns = [r["n"] for r in results]
    with three_panels(path) as ax:
        ax[0].plot(ns, [r["running_from_first_s"] for r in results], "o-")
        ax[0].set(title="first submission -> every job Running", xlabel="jobs (x4 pods)", ylabel="s")
        ax[1].plot(ns, [r["rss_mb"] for r in results], "o-", label="peak RSS")
        ax[1].set(title="controller peak RSS", xlabel="jobs (x4 pods)", ylabel="MB")
        ax[2].plot(ns, [r["p50_ms"] for r in results], "o-", label="p50")
        ax[2].plot(ns, [r["p99_ms"] for r in results], "s-", label="p99")
        ax[2].axhline(300, color="grey", ls="--", lw=0.8, label="goal p99 300 ms")
        ax[2].set(title="pod ended -> its job's status written", xlabel="jobs (x4 pods)", ylabel="ms")
        ax[2].legend()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 500, 1000, 2000])
    parser.add_argument("--kubeconfig", default=str(ROOT / ".local-cluster" / "kubeconfig"))
    parser.add_argument("--timeout", type=float, default=1800, help="per N")
    parser.add_argument("--no-extra-nodes", action="store_true", help="refuse an N the kwok nodes cannot hold")
    parser.add_argument("--profile", type=int, nargs="?", const=-1, metavar="N",
                        help="sample the controller with py-spy (the 'bench' extra) at this N (default: the largest); "
                             "print the top costs")  # fmt: skip
    parser.add_argument("--plot", help="write the curves to this PNG (needs matplotlib: the 'bench' extra)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.profile == -1:
        args.profile = max(args.jobs)
    cluster = Cluster(args.kubeconfig)
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    results = []
    with pod_capacity(cluster, 4 * max(args.jobs), allow_extra=not args.no_extra_nodes):
        for n in args.jobs:
            time.sleep(3)
            prof = log_dir / f"profile-{n}.txt" if n == args.profile else None
            r = run(cluster, n, log_dir, args.timeout, prof)
            results.append(r)
            with (log_dir / "scaling.jsonl").open("a") as f:
                f.write(json.dumps(r) + "\n")
            print(f"N={n}: every job Running {r['running_from_first_s']:.1f} s after the first submission, "
                  f"RSS {r['rss_mb']:.0f} MB, "
                  f"pod end -> status p50 {r['p50_ms']:.0f} ms p99 {r['p99_ms']:.0f} ms", flush=True)  # fmt: skip
    print(f"\nMachine: {machine()}\n")
    print(table(["jobs", "pods", "submit (s)", "first submission -> every pod exists (s)", "-> every job Running (s)",
                 "per job (ms)", "peak RSS (MB)", "RSS per job (KB)", "CPU (s)", "CPU per job (ms)",
                 "pod end -> status p50 (ms)", "p99 (ms)", "max (ms)", "status writes / job", "failed"],
                [[r["n"], 4 * r["n"], r["submit_s"], r["pods_exist_s"], r["running_from_first_s"],
                  1000 * r["running_from_first_s"] / r["n"], r["rss_mb"],
                  (1024 * (r["rss_mb"] - results[0]["rss_mb"]) / (r["n"] - results[0]["n"])
                   if r is not results[0] else float("nan")),
                  r["cpu_s"], 1000 * r["cpu_s"] / r["n"], r["p50_ms"], r["p99_ms"], r["max_ms"],
                  r["status_writes_per_job"], r["failed"]] for r in results]))  # fmt: skip
    print("(RSS per job: the growth over the smallest N, divided by the extra jobs)")
    if args.profile:
        print(f"\nWhere the controller's CPU went at N = {args.profile} (py-spy):\n")
        print(top_costs(log_dir / f"profile-{args.profile}.txt"))
    if args.plot:
        plot(results, Path(args.plot))
        print(f"curves: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
