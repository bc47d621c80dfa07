"""Hang detection (docs/progress.md, "Hang detection"; not part of the tests): how long a stall takes
to be acted on, and what watching for stalls costs while nothing stalls.

    scripts/local-cluster.sh up --real-node
    .venv/bin/python benchmarks/hang_detection.py [--stalls 20] [--deadline 10] [--strategy InPlace|Recreate]
                                                  [--jobs 50] [--seconds 60] [--interval 10] [--part latency --part cost]

``latency`` (the real node): one GenericJob whose replica, a real Python process, prints a few
``T9K_PROGRESS`` lines and then blocks (as in a collective that never returns), with
``progressDeadlineSeconds`` DEADLINE and enough restarts for STALLS stalls. Every restart runs
the program again, which reports and blocks again. Each report's step is its send time (tenths of
a second since the run began), so the status at each stall says when the last report was sent.
For every stall a watch of the job gives, from the last report: the decision (``Stalled`` true
with a new ``status.stall.key``; the evidence is asked for in the same pass), and the restart
acted on (a ``restartHistory`` entry with reason ``ProgressDeadlineExceeded``). It prints p50/p99
of both, and of how far past the deadline they came.

``cost`` (kwok): JOBS GenericJobs that report every REPORT seconds (lines appended to kwok's
pod-log file, which kwok serves as each pod's log), for SECONDS, twice: with a
``progressDeadlineSeconds`` they never reach, and without it. From the controller's own
/metrics (``rest_client_requests_total``, its passes) and the API server's: API requests per job,
status writes per job and passes per job in each run. The difference is what hang detection
costs while nothing stalls: a timer per job, no request.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import requests
from _bench import DEFAULT_KUBECONFIG, Cluster, Ours, Watch, machine, pct, pod_capacity, table, wait_for

GROUP, VERSION, PLURAL = "batch.tensorstack.dev", "v1beta1", "genericjobs"
JOBS_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/{{ns}}/{PLURAL}"
IMAGE = "localhost/airflow-t9k/train:1"
TOTAL = 10**9
_REQ = re.compile(r"^rest_client_requests_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_PASSES = re.compile(r"^controller_runtime_reconcile_total\{[^}]*\} (?P<value>\S+)$")

# The real replica: a few reports (step = tenths of a second since BENCH_BASE), then it blocks.
PROGRAM = """
import os, time
base = float(os.environ["BENCH_BASE"])
print("run", os.environ.get("T9K_RESTART_COUNT", "0"), flush=True)
for _ in range(int(os.environ.get("BENCH_REPORTS", "3"))):
    time.sleep(0.5)
    print(f"T9K_PROGRESS step={int((time.time() - base) * 10)} total_steps=%d" % 10**9, flush=True)
print("all-reduce: waiting for peers", flush=True)
while True:
    time.sleep(3600)
"""


def real_job(name: str, base: float, args: argparse.Namespace) -> dict[str, Any]:
    container = {"name": "main", "image": IMAGE, "imagePullPolicy": "Never", "command": ["python3", "/bench/program.py"],
                 "env": [{"name": "BENCH_BASE", "value": repr(base)}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
                 "volumeMounts": [{"name": "bench", "mountPath": "/bench"}],
                 "resources": {"requests": {"cpu": "10m", "memory": "24Mi"}, "limits": {"memory": "64Mi"}}}  # fmt: skip
    spec = {"containers": [container], "nodeSelector": {"t9k.test/real": "true"}, "terminationGracePeriodSeconds": 1,
            "tolerations": [{"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"}],
            "volumes": [{"name": "bench", "configMap": {"name": "bench"}}]}  # fmt: skip
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"progressDeadlineSeconds": args.deadline, "restartStrategy": args.strategy,
                     "replicaSpecs": [{"type": "worker", "replicas": args.replicas, "template": {"spec": spec},
                                       "restartPolicy": {"policy": "OnFailure", "limit": args.stalls + 1}}]}}  # fmt: skip


@dataclass
class Stalls:
    """What a watch of the job saw of each stall: (last report sent, decision seen, restart seen)."""

    base: float
    decided: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (last report, arrival)
    restarted: dict[str, float] = field(default_factory=dict)  # key -> arrival
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_event(self, kind: str, obj: dict, _: float) -> None:
        arrival = time.time()  # the program's clock (the same host), not the watch's monotonic one
        status = obj.get("status") or {}
        rec = status.get("stall") or {}
        key = rec.get("key")
        stalled = any(c.get("type") == "Stalled" and c.get("status") == "True" for c in status.get("conditions") or [])
        step = (status.get("progress") or {}).get("step")
        with self.lock:
            if key and stalled and key not in self.decided and isinstance(step, int):
                self.decided[key] = (self.base + step / 10, arrival)
            entries = [e for e in status.get("restartHistory") or [] if e.get("reason") == "ProgressDeadlineExceeded"]
            for e in entries:
                k = str(e.get("podUID", "")).removeprefix("stall/")
                self.restarted.setdefault(k, arrival)

    def rows(self) -> list[tuple[float, float]]:
        """(decision, restart) seconds after the last report, for each stall seen whole."""
        with self.lock:
            return [(seen - sent, self.restarted[k] - sent) for k, (sent, seen) in self.decided.items() if k in self.restarted]


def latency(cluster: Cluster, args: argparse.Namespace, log_dir: Path) -> str:
    ns = f"bench-hang-{uuid.uuid4().hex[:5]}"
    cluster.create_namespace(ns)
    flags = ["--progress-interval", "1"] + (["--in-place-restarts", "on"] if args.strategy == "InPlace" else [])
    ctrl = Ours(cluster, ns, log_dir, kind="GenericJob", extra=tuple(flags))
    base = time.time()
    stalls = Stalls(base)
    watch = None
    try:
        ctrl.start()
        cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "bench"},
                                                                       "data": {"program.py": PROGRAM}})  # fmt: skip
        watch = Watch(cluster, JOBS_PATH.format(ns=ns), stalls.on_event)
        cluster.request("POST", JOBS_PATH.format(ns=ns), real_job("hang", base, args))
        budget = args.stalls * (args.deadline + 60) + 120
        wait_for(f"{args.stalls} stalls acted on", lambda: len(stalls.rows()) >= args.stalls, budget, 1)
        status = cluster.get(f"{JOBS_PATH.format(ns=ns)}/hang").get("status") or {}
    finally:
        if watch is not None:
            watch.stop()
        ctrl.stop()
        cluster.delete_namespace(ns, wait=False)
    rows = stalls.rows()[: args.stalls]
    decided, acted = [d for d, _ in rows], [a for _, a in rows]
    over_d, over_a = [d - args.deadline for d in decided], [a - args.deadline for a in acted]
    in_place = sum(1 for e in status.get("restartHistory") or [] if e.get("inPlace"))
    head = (f"{machine()}; {len(rows)} stalls of one real replica x{args.replicas}, progressDeadlineSeconds {args.deadline}, "
            f"restartStrategy {args.strategy} ({in_place} of the last entries in place)")  # fmt: skip
    return "\n".join([head, "", table(
        ["from the last report to", "p50 s", "p99 s", "max s", "past the deadline p50 s", "p99 s"],
        [["the decision (Stalled, evidence asked for)", pct(decided, 50), pct(decided, 99), max(decided, default=float("nan")),
          pct(over_d, 50), pct(over_d, 99)],
         ["the restart acted on (restartHistory)", pct(acted, 50), pct(acted, 99), max(acted, default=float("nan")),
          pct(over_a, 50), pct(over_a, 99)]])])  # fmt: skip


def controller_counts(ctrl: Ours) -> tuple[float, float]:
    """(API requests, reconcile passes) from the controller's own /metrics."""
    text = requests.get(f"http://127.0.0.1:{ctrl.port}/metrics", timeout=5).text
    reqs = sum(float(m.group("value")) for line in text.splitlines() if (m := _REQ.match(line)))
    passes = sum(float(m.group("value")) for line in text.splitlines() if (m := _PASSES.match(line)))
    return reqs, passes


def kwok_job(name: str, deadline: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]}  # fmt: skip
    if deadline is not None:
        spec["progressDeadlineSeconds"] = deadline
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GenericJob", "metadata": {"name": name}, "spec": spec}


def cost_run(cluster: Cluster, args: argparse.Namespace, log_dir: Path, watched: bool) -> list[Any]:
    ns = f"bench-quiet-{uuid.uuid4().hex[:5]}"
    cluster.create_namespace(ns)
    logs = Path(cluster.kubeconfig).parent / "pod-logs" / ns / "all.log"
    logs.parent.mkdir(parents=True, exist_ok=True)
    logs.write_text("2000-01-01T00:00:00.000000000Z stdout F container started (simulated by kwok)\n")
    ctrl = Ours(cluster, ns, log_dir, kind="GenericJob",
                extra=("--progress-interval", str(args.interval), "--progress-streams", str(max(args.jobs, 200))))  # fmt: skip
    deadline = max(10 * args.report, 60) if watched else None
    try:
        ctrl.start()
        cluster.post_all([(JOBS_PATH.format(ns=ns), kwok_job(f"q{i}", deadline)) for i in range(args.jobs)])

        def running() -> int:
            items = cluster.get(JOBS_PATH.format(ns=ns))["items"]
            return sum(1 for i in items if (i.get("status") or {}).get("phase") == "Running")

        wait_for("every job Running", lambda: running() == args.jobs, 600, 1)
        wait_for("every log followed", lambda: ctrl.metrics().get("progress_stream_open", 0) >= args.jobs, 300, 1)

        def report() -> None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() % 1 * 1e6):06d}Z"
            with open(logs, "a") as f:
                f.write(f"{stamp} stdout F T9K_PROGRESS step={int(time.time())} total_steps={TOTAL}\n")

        report()
        time.sleep(args.interval + 2)  # every job's first values written
        writes0 = cluster.write_counts()
        reqs0, passes0 = controller_counts(ctrl)
        t0 = time.time()
        while time.time() < t0 + args.seconds:
            report()
            time.sleep(args.report)
        reqs1, passes1 = controller_counts(ctrl)
        writes1 = cluster.write_counts()
        items = cluster.get(JOBS_PATH.format(ns=ns))["items"]
        stalled = sum(1 for i in items for c in (i.get("status") or {}).get("conditions") or [] if c.get("type") == "Stalled")
    finally:
        ctrl.stop()
        cluster.delete_namespace(ns, wait=False)
    status_writes = sum(n for (res, verb, _), n in (writes1 - writes0).items() if res == f"{PLURAL}/status")
    n = args.jobs
    return [f"progressDeadlineSeconds {deadline}" if watched else "no progressDeadlineSeconds", n, f"{args.seconds:.0f}",
            reqs1 - reqs0, (reqs1 - reqs0) / n, status_writes / n, (passes1 - passes0) / n, stalled]  # fmt: skip


def cost(cluster: Cluster, args: argparse.Namespace, log_dir: Path) -> str:
    with pod_capacity(cluster, args.jobs + 50):
        rows = [cost_run(cluster, args, log_dir, watched) for watched in (True, False)]
    head = (f"{machine()}; kwok replicas reporting every {args.report:g} s, --progress-interval {args.interval:g}, "
            f"{args.seconds:.0f} s measured")  # fmt: skip
    return "\n".join([head, "", table(["run", "jobs", "s", "controller API requests", "per job", "status writes per job",
                                       "passes per job", "Stalled conditions"], rows)])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", action="append", choices=["latency", "cost"], help="default: both")
    parser.add_argument("--stalls", type=int, default=20)
    parser.add_argument("--deadline", type=int, default=10, help="progressDeadlineSeconds of the stalling job")
    parser.add_argument("--replicas", type=int, default=1, help="replicas of the stalling job")
    parser.add_argument("--strategy", choices=["InPlace", "Recreate"], default="InPlace")
    parser.add_argument("--jobs", type=int, default=50, help="jobs that report and never stall")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--report", type=float, default=2.0, help="seconds between two reports of those jobs")
    parser.add_argument("--interval", type=float, default=10.0, help="the controller's --progress-interval there")
    parser.add_argument("--kubeconfig", default=str(DEFAULT_KUBECONFIG))
    args = parser.parse_args()
    cluster = Cluster(args.kubeconfig)
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for part in args.part or ["latency", "cost"]:
        out.append(latency(cluster, args, log_dir) if part == "latency" else cost(cluster, args, log_dir))
        print(f"{part}: done", flush=True)
    print("\n\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
