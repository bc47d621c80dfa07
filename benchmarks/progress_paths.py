"""What each progress path costs while N jobs report every second (docs/progress.md; not part of the tests).

    scripts/local-cluster.sh up                     # --real-node for --replicas real
    .venv/bin/python benchmarks/progress_paths.py [--jobs 200] [--seconds 60] [--rate 1] [--interval 10]
                                                  [--path stdout --path push] [--replicas kwok|real]

For each path, one after the other, in a namespace of its own with a controller of its own
(``--progress-interval INTERVAL``):

- ``stdout``: the controller follows each running job's replica log (``--progress-streams N``).
  With kwok replicas the benchmark appends a ``T9K_PROGRESS`` line RATE times a second to kwok's
  pod-log file, which kwok serves as every pod's log: every job reports each line.
- ``push``: the controller serves its endpoint (``--progress-endpoint``, a CA made at start) and
  follows no log (``--progress-streams 0``). With kwok replicas the benchmark is each replica:
  it mints a token bound to each pod (the TokenRequest API, as the kubelet does) and POSTs
  Kubeflow Trainer's body for each job RATE times a second, spread over the second, on kept-alive
  connections, as ``airflow_t9k.progress`` does.
- ``--replicas real``: the replicas are real Python processes on the real node (10m CPU each):
  ``print`` of a ``T9K_PROGRESS`` line, or ``airflow_t9k.progress.report`` (the helper from a
  ConfigMap), RATE times a second; the controller listens on the bridge address 10.88.0.1.

Every report's step is the time it was sent, in tenths of a second since the run began, so a
status write says which report it carries. After every job has its first values and one interval
has passed, for SECONDS it measures: API server CPU (``process_cpu_seconds_total``) and requests
by verb and resource (``apiserver_request_total``), both from its /metrics; the controller's CPU
(/proc) and RSS (now and peak); job status writes per job; and for each status write a watch
sees, the time from the report it carries being sent to the write arriving (p50/p99). It prints
one Markdown table per run (docs/progress.md, "Measured").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import ssl
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import aiohttp
from _bench import (
    DEFAULT_KUBECONFIG,
    Cluster,
    Ours,
    Watch,
    cpu_seconds,
    free_port,
    host_busy_seconds,
    machine,
    pct,
    peak_rss_mb,
    pod_capacity,
    table,
    wait_for,
)

GROUP, VERSION, PLURAL = "batch.tensorstack.dev", "v1beta1", "genericjobs"
TOTAL = 10**9  # total_steps of every report: the Progress column has a percent, the ETA a rate
NODE_ADDRESS = "10.88.0.1"  # where the real node's pods reach the host (docs/real-node.md)
IMAGE = "localhost/airflow-t9k/train:1"
_REQ = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')

# The real replicas' program: a report RATE times a second, by the path's way, forever.
PROGRAM = """
import os, sys, time
base, rate, path = float(os.environ["BENCH_BASE"]), float(os.environ["BENCH_RATE"]), os.environ["BENCH_PATH"]
if path == "push":
    from airflow_t9k.progress import report
n = 0
while True:
    n += 1
    step = int((time.time() - base) * 10)
    if path == "push":
        report(step=step, total_steps=TOTAL, loss=1.0 / n)
    else:
        print(f"T9K_PROGRESS step={step} total_steps=TOTAL loss={1.0 / n:g}", flush=True)
    time.sleep(max(0.0, base + n / rate - time.time()) if n > 1 else 1.0 / rate)
""".replace("TOTAL", str(TOTAL))


@dataclass
class Run:
    path: str
    jobs: int
    seconds: float = 0.0
    sent: int | None = None  # reports sent (None: by real replicas, not counted here)
    answers: Counter[int] = field(default_factory=Counter)  # the push path's HTTP statuses (0: no answer)
    writes: int = 0
    latencies: list[float] = field(default_factory=list)
    api_cpu: float = 0.0
    api_requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    ctrl_cpu: float = 0.0
    ctrl_rss: float = 0.0
    ctrl_peak: float = 0.0
    host_busy: float = 0.0
    bench_cpu: float = 0.0


def apiserver(cluster: Cluster) -> tuple[float, Counter[tuple[str, str]]]:
    """(process_cpu_seconds_total, apiserver_request_total by (verb, resource[/subresource]))."""
    cpu, reqs = float("nan"), Counter[tuple[str, str]]()
    for line in cluster.request("GET", "/metrics").splitlines():
        if line.startswith("process_cpu_seconds_total "):
            cpu = float(line.split()[1])
        elif m := _REQ.match(line):
            labels = dict(_LABEL.findall(m.group("labels")))
            res = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            reqs[(labels.get("verb", ""), res or "-")] += int(float(m.group("value")))
    return cpu, reqs


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def job_body(name: str, real: bool, path: str, base: float, rate: float) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    spec: dict[str, Any] = {"containers": [container]}
    if real:
        container.update({"image": IMAGE, "imagePullPolicy": "Never", "command": ["python3", "/bench/program.py"],
                          "env": [{"name": "BENCH_BASE", "value": repr(base)}, {"name": "BENCH_RATE", "value": str(rate)},
                                  {"name": "BENCH_PATH", "value": path}, {"name": "PYTHONPATH", "value": "/helper"},
                                  {"name": "T9K_PROGRESS_MIN_INTERVAL", "value": str(1 / rate)}],
                          "volumeMounts": [{"name": "bench", "mountPath": "/bench"},
                                           {"name": "helper", "mountPath": "/helper/airflow_t9k"}],
                          "resources": {"requests": {"cpu": "10m", "memory": "24Mi"}, "limits": {"memory": "64Mi"}}})  # fmt: skip
        spec.update({"nodeSelector": {"t9k.test/real": "true"}, "terminationGracePeriodSeconds": 1,
                     "tolerations": [{"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"}],
                     "volumes": [{"name": "bench", "configMap": {"name": "bench"}},
                                 {"name": "helper", "configMap": {"name": "helper"}}]})  # fmt: skip
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": spec}}]}}  # fmt: skip


class Writes:
    """Every status.progress write of the namespace's jobs a watch sees: (arrival, job, step)."""

    def __init__(self, cluster: Cluster, ns: str) -> None:
        self.seen: list[tuple[float, str, int]] = []
        self.last: dict[str, str] = {}
        self.lock = threading.Lock()
        self.watch = Watch(cluster, f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}", self.on_event)

    def on_event(self, kind: str, obj: dict, arrival: float) -> None:
        p = (obj.get("status") or {}).get("progress") or {}
        name = obj["metadata"]["name"]
        if p.get("updated") and self.last.get(name) != p["updated"] and isinstance(p.get("step"), int):
            with self.lock:
                self.last[name] = p["updated"]
                self.seen.append((time.time(), name, p["step"]))

    def with_progress(self) -> int:
        with self.lock:
            return len(self.last)


async def push_reports(targets: list[tuple[str, str]], ca_pem: str, base: float, until: float, rate: float,
                       counts: Counter[int], done: Callable[[], bool] | None = None) -> None:  # fmt: skip
    """Each (url, token) POSTs Trainer's body RATE times a second until ``until`` (wall time) or
    ``done()``, the jobs spread evenly over each period, each on its own kept-alive connection."""
    ctx = ssl.create_default_context(cadata=ca_pem)
    period = 1 / rate
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=0)) as session:

        async def one(i: int, url: str, token: str) -> None:
            at = time.time() + i / len(targets) * period
            n = 0
            while at < until and not (done and done()):
                await asyncio.sleep(max(0.0, at - time.time()))
                n += 1
                step = int((time.time() - base) * 10)
                metrics = [{"name": "step", "value": str(step)}, {"name": "total_steps", "value": str(TOTAL)},
                           {"name": "loss", "value": repr(1 / n)}]  # fmt: skip
                try:
                    async with session.post(url, json={"trainerStatus": {"metrics": metrics}},
                                            headers={"Authorization": f"Bearer {token}"}) as resp:  # fmt: skip
                        await resp.read()
                        counts[resp.status] += 1
                except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
                    counts[0] += 1
                at += period

        await asyncio.gather(*(one(i, url, token) for i, (url, token) in enumerate(targets)))


def mint(cluster: Cluster, ns: str, pod: dict) -> str:
    body = {"spec": {"audiences": ["airflow-t9k-progress"], "expirationSeconds": 3600,
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                        "uid": pod["metadata"]["uid"]}}}  # fmt: skip
    return str(cluster.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/default/token", body)["status"]["token"])


def run(cluster: Cluster, path: str, args: argparse.Namespace, log_dir: Path) -> Run:
    real = args.replicas == "real"
    ns = f"bench-{path}-{uuid.uuid4().hex[:5]}"
    cluster.create_namespace(ns)
    flags = ["--progress-interval", str(args.interval)]
    if path == "stdout":
        flags += ["--progress-streams", str(max(args.jobs, 200))]
    else:
        port = free_port()
        host = NODE_ADDRESS if real else "127.0.0.1"
        flags += ["--progress-streams", "0", "--progress-endpoint", f"https://{host}:{port}", "--progress-address", host,
                  "--progress-port", str(port), "--progress-push-rate", str(max(2.0, 2 * args.rate)),
                  "--progress-push-burst", str(max(10.0, 4 * args.rate))]  # fmt: skip
        if not real:  # this process posts for the kwok pods, from none of their addresses
            flags += ["--progress-check-source-ip", "off"]
    ctrl = Ours(cluster, ns, log_dir, kind="GenericJob", extra=tuple(flags))
    result = Run(path, args.jobs)
    base = time.time()
    writes: Writes | None = None
    try:
        pid = ctrl.start()
        if real:
            from airflow_t9k import progress

            helper = {"__init__.py": "", "progress.py": Path(progress.__file__).read_text()}
            for name, data in (("bench", {"program.py": PROGRAM}), ("helper", helper)):
                cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": name}, "data": data})
        writes = Writes(cluster, ns)
        jobs = [(f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}", job_body(f"p{i}", real, path, base, args.rate))
                for i in range(args.jobs)]  # fmt: skip
        cluster.post_all(jobs)

        def phases() -> list[str]:
            items = cluster.get(f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}")["items"]
            return [(i.get("status") or {}).get("phase") for i in items]

        wait_for("every job Running", lambda: phases().count("Running") == args.jobs, 600, 1)
        targets: list[tuple[str, str]] = []
        ca = ""
        if path == "push" and not real:
            pods = cluster.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            ca = pods[0]["metadata"]["annotations"]["batch.tensorstack.dev/progress-ca"]  # what each pod's ca.crt holds
            with ThreadPoolExecutor(16) as pool:
                tokens = list(pool.map(lambda p: mint(cluster, ns, p), pods))
            urls = [next(e["value"] for e in p["spec"]["containers"][0]["env"] if e["name"] == "T9K_PROGRESS_URL") for p in pods]
            targets = list(zip(urls, tokens, strict=True))
        # Warm-up: every job's first values written (TokenReviews done, streams open), then an interval.
        if not real:
            if path == "stdout":
                wait_for("every log followed", lambda: ctrl.metrics().get("progress_stream_open", 0) >= args.jobs, 300, 1)
                append(cluster, base, 1)
            else:
                # One session for the whole warm-up (the first reports wait on the controller's
                # TokenReview rate): a new session each second, as before, made every replica
                # shake hands again each second, which at 1,000 jobs kept both sides busy with TLS.
                counts: Counter[int] = Counter()
                asyncio.run(push_reports(targets, ca, base, time.time() + 300, 1.0, counts,
                                         done=lambda: writes.with_progress() >= args.jobs))  # fmt: skip
        wait_for("every job's first values in its status", lambda: writes.with_progress() >= args.jobs, 300, 0.5)
        time.sleep(args.interval + 1)

        api0, req0 = apiserver(cluster)
        cpu0, host0, bench0 = cpu_seconds(pid), host_busy_seconds(), time.process_time()
        t0 = time.time()
        until = t0 + args.seconds
        if real:
            time.sleep(args.seconds)
        elif path == "stdout":
            n = 0
            while time.time() < until:
                n += 1
                append(cluster, base, 1)
                result.sent = (result.sent or 0) + args.jobs
                time.sleep(max(0.0, t0 + n / args.rate - time.time()))
        else:
            asyncio.run(push_reports(targets, ca, base, until, args.rate, result.answers))
            result.sent = sum(result.answers.values())
        t1 = time.time()
        api1, req1 = apiserver(cluster)
        cpu1, host1, bench1 = cpu_seconds(pid), host_busy_seconds(), time.process_time()
        result.ctrl_rss, result.ctrl_peak = rss_mb(pid), peak_rss_mb(pid)
        result.seconds = t1 - t0
        result.api_cpu, result.ctrl_cpu = api1 - api0, cpu1 - cpu0
        result.host_busy, result.bench_cpu = host1 - host0, bench1 - bench0
        result.api_requests = req1 - req0
        result.writes = result.api_requests.get(("PUT", f"{PLURAL}/status"), 0)
        with writes.lock:
            result.latencies = [arrival - (base + step / 10) for arrival, _, step in writes.seen if t0 <= arrival <= t1]
    finally:
        if writes is not None:
            writes.watch.stop()
        ctrl.stop()
        cluster.delete_namespace(ns, wait=False)
    return result


def append(cluster: Cluster, base: float, lines: int) -> None:
    """As if every kwok pod printed a report now (kwok serves this file as every pod's log)."""
    pod_log = Path(cluster.kubeconfig).parent / "pod-logs" / "all.log"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() % 1 * 1e6):06d}Z"
    step = int((time.time() - base) * 10)
    with open(pod_log, "a") as f:
        for _ in range(lines):
            f.write(f"{stamp} stdout F T9K_PROGRESS step={step} total_steps={TOTAL} loss={1 / max(step, 1):g}\n")


def report(runs: list[Run], args: argparse.Namespace) -> str:
    rows = []
    for r in runs:
        answers = ", ".join(f"{c}: {n}" for c, n in sorted(r.answers.items()))
        sent = "in the pods" if r.sent is None else f"{r.sent}" + (f" ({answers})" if answers else "")
        rows.append([r.path, r.jobs, f"{r.seconds:.0f}", sent, r.writes, f"{r.writes / r.jobs:.1f}",
                     f"{r.api_cpu / r.seconds * 100:.1f}%", sum(r.api_requests.values()),
                     f"{r.ctrl_cpu / r.seconds * 100:.1f}%", f"{r.ctrl_rss:.1f} / {r.ctrl_peak:.1f}",
                     f"{pct(r.latencies, 50):.2f}", f"{pct(r.latencies, 99):.2f}", len(r.latencies),
                     f"{r.host_busy / r.seconds * 100:.0f}%", f"{r.bench_cpu / r.seconds * 100:.0f}%"])  # fmt: skip
    out = [f"{machine()}; {args.replicas} replicas, {args.rate:g} report/s each, --progress-interval {args.interval:g}", "",
           table(["path", "jobs", "s", "reports (HTTP status: n)", "status writes", "per job", "API server CPU",
                  "API requests", "controller CPU", "controller RSS now / peak MB", "latency p50 s", "p99 s", "writes seen",
                  "host busy (of 1 CPU)", "benchmark's own CPU"], rows)]  # fmt: skip
    for r in runs:
        top = sorted(((n, v, res) for (v, res), n in r.api_requests.items() if n), reverse=True)[:8]
        out.append(f"\n{r.path}: API requests in {r.seconds:.0f} s by verb and resource: "
                   + ", ".join(f"{v} {res} {n}" for n, v, res in top))  # fmt: skip
    return "\n".join(out)


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")


@contextlib.contextmanager
def follow_room(streams: int) -> Iterator[None]:
    """kwok follows each pod log as the kubelet does (k8s.io/cri-client's ReadLogs), with one
    inotify instance per followed log; past the host's limit (fs.inotify.max_user_instances,
    often 128, shared with every process of the user) a follow ends at the log's end with
    "failed to create fsnotify watcher", and the controller opens it again a second later. So
    every stream past the limit was opened about once a second: the limit is raised for the run
    (a node running this many followed containers raises it too) and put back after."""
    try:
        before = int(INOTIFY_INSTANCES.read_text())
    except OSError:
        yield
        return
    want = max(before, streams + 512)  # one per stream, and room for every other process of the user
    if want > before:
        try:
            INOTIFY_INSTANCES.write_text(str(want))
            print(f"fs.inotify.max_user_instances {before} -> {want} for the run", flush=True)
        except OSError as exc:
            print(f"fs.inotify.max_user_instances stays {before} ({exc}): streams past it are reopened each second", flush=True)
    try:
        yield
    finally:
        if want > before:
            with contextlib.suppress(OSError):
                INOTIFY_INSTANCES.write_text(str(before))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60, help="how long the measured window lasts")
    parser.add_argument("--rate", type=float, default=1.0, help="reports a second, per job")
    parser.add_argument("--interval", type=float, default=10.0, help="the controller's --progress-interval")
    parser.add_argument("--path", action="append", choices=["stdout", "push"], help="default: both, stdout first")
    parser.add_argument("--replicas", choices=["kwok", "real"], default="kwok")
    parser.add_argument("--kubeconfig", default=str(DEFAULT_KUBECONFIG))
    args = parser.parse_args()
    cluster = Cluster(args.kubeconfig)
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    room = pod_capacity(cluster, args.jobs + 50) if args.replicas == "kwok" else contextlib.nullcontext()
    with room, follow_room(args.jobs):
        for path in args.path or ["stdout", "push"]:
            runs.append(run(cluster, path, args, log_dir))
            print(f"{path}: done", flush=True)
    print(report(runs, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
