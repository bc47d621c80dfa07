"""A scale run with every feature on: N PyTorchTrainingJobs (1 master + 3 workers) from a job
template, queued through Kueue, each reporting progress by push, usage counted (issue 32 item 5;
not part of the tests).

    scripts/local-cluster.sh up && scripts/local-cluster.sh kueue up
    .venv/bin/python benchmarks/scale_everything.py --jobs 1000 3000 [--plot docs/images/benchmarks-everything.png]

Each N's results are appended to .local-cluster/bench-logs/scale_everything.jsonl; `--replot
that.jsonl --plot PNG` draws the curves of every N recorded there without running anything.

Per N, in a fresh namespace with a fresh controller (`airflow-t9k controller --kind
PyTorchTrainingJob -n NS`, its progress endpoint on 127.0.0.1, no log followed):

- a T9kJobTemplate `bench-torch` gives every pod (image, the kwok run time, 10m CPU and 16Mi
  requested), the clean-up policy and the queue; each job names it and gives only its replica
  counts and container name;
- a ClusterQueue with room for every job and a LocalQueue `bench`: every job waits for Kueue's
  admission of its Workload before its pods (the controller's --queueing auto finds Kueue);
- once a job's master pod is Running, the benchmark acts as that replica: it mints a token bound
  to the pod (the TokenRequest API, as the kubelet does) and POSTs Kubeflow Trainer's body to
  the URL the pod's env names, once;
- kwok ends every pod SIM_SECONDS after it runs.

Printed per N: submission time; first submission -> every pod exists, -> every job Running;
pod end -> its job's next status write (p50/p99); report -> status.progress written (p50/p99);
how many jobs had a Workload, progress and usage in their status; the controller's peak RSS and
CPU; API requests by verb over the run (the API server's own /metrics); the host's other load.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (
    KUEUE,
    ROOT,
    SIM_SECONDS,
    Cluster,
    Ours,
    Recorder,
    Watch,
    cpu_seconds,
    free_port,
    host_busy_seconds,
    kueue_queues,
    machine,
    pct,
    peak_rss_mb,
    pod_capacity,
    table,
    three_panels,
    wait_for,
)  # fmt: skip
from progress_paths import apiserver, mint
from vs_kubeflow import T9K, t9k_state

TEMPLATES = "/apis/batch.tensorstack.dev/v1beta1/namespaces/{ns}/t9kjobtemplates"
REQUESTS = {"cpu": "10m", "memory": "16Mi"}


def template() -> dict:
    pod = {"metadata": {"annotations": {"sim.t9k.test/duration": f"{SIM_SECONDS}s"}},
           "spec": {"containers": [{"name": "pytorch", "image": "busybox", "command": ["sh", "-c", f"sleep {SIM_SECONDS}"],
                                    "resources": {"requests": REQUESTS}}]}}  # fmt: skip
    # cleanUpPolicy None, as vs_kubeflow.py: the default deletes a worker kwok has not ended
    # when the master's success ends the job, and that pod's end is never seen.
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "T9kJobTemplate", "metadata": {"name": "bench-torch"},
            "spec": {"jobKind": "PyTorchTrainingJob", "template": pod,
                     "jobSpec": {"runPolicy": {"cleanUpPolicy": "None"},
                                 "scheduler": {"t9kScheduler": {"queue": "bench"}}}}}  # fmt: skip


def job(name: str) -> dict:
    specs = [{"type": t, "replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [{"name": "pytorch"}]}}}
             for t, n in (("master", 1), ("worker", 3))]  # fmt: skip
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": name},
            "spec": {"templateRef": {"name": "bench-torch"}, "replicaSpecs": specs}}  # fmt: skip


class Reporter:
    """Each job's master pod, once Running, reports once by push (a thread pool: the token
    request and the POST are the replica's work, not the watch's)."""

    def __init__(self, cluster: Cluster, ns: str, ca_file: Path) -> None:
        self.cluster, self.ns, self.ca_file = cluster, ns, ca_file
        self.pool = ThreadPoolExecutor(8)
        self.futures: list[Future[None]] = []
        self.started: set[str] = set()
        self.sent: dict[str, float] = {}  # job -> when the attempt that was answered 2xx began
        self.answers: Counter[int] = Counter()  # HTTP status (0: no answer) -> reports
        self.lock = threading.Lock()
        self.local = threading.local()

    def on_pod(self, kind: str, pod: dict, t: float) -> None:
        name = pod["metadata"]["name"]
        if not name.endswith("-master-0") or (pod.get("status") or {}).get("phase") != "Running":
            return
        job = name[: -len("-master-0")]
        with self.lock:
            if job in self.started:
                return
            self.started.add(job)
        self.futures.append(self.pool.submit(self._report, job, pod))

    def _report(self, job: str, pod: dict) -> None:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
            session.trust_env = False
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
        metrics = [{"name": "step", "value": "10"}, {"name": "total_steps", "value": "100"}, {"name": "loss", "value": "0.5"}]
        for attempt in range(3):  # as airflow_t9k.progress does: a refused or lost report is sent again
            if attempt:
                time.sleep(attempt)
            status, began = 0, time.monotonic()
            try:
                self._trust(pod)
                token = mint(self.cluster, self.ns, pod)
                resp = session.post(env["T9K_PROGRESS_URL"], json={"trainerStatus": {"metrics": metrics}},
                                    headers={"Authorization": f"Bearer {token}"}, verify=str(self.ca_file),
                                    timeout=30)  # fmt: skip
                status = resp.status_code
            except (requests.RequestException, OSError, KeyError, RuntimeError):
                pass
            with self.lock:
                self.answers[status] += 1
                if 200 <= status < 300:
                    self.sent[job] = began
                    return

    def _trust(self, pod: dict) -> None:
        """The CA the controller gives every pod (made at its start), written once for requests."""
        with self.lock:
            if not self.ca_file.exists():
                tmp = self.ca_file.with_suffix(".tmp")
                tmp.write_text(pod["metadata"]["annotations"]["batch.tensorstack.dev/progress-ca"])
                tmp.replace(self.ca_file)

    def stop(self) -> None:
        self.pool.shutdown(wait=True)
        for f in self.futures:
            f.result()  # a report that crashed says so here instead of vanishing


class Statuses:
    """When each job's status first carried progress, and which jobs' usage counted all 4 runs."""

    def __init__(self) -> None:
        self.progress: dict[str, float] = {}
        self.usage: set[str] = set()
        self.lock = threading.Lock()

    def on_job(self, kind: str, obj: dict, t: float) -> None:
        status = obj.get("status") or {}
        name = obj["metadata"]["name"]
        with self.lock:
            if status.get("progress"):
                self.progress.setdefault(name, t)
            usage = status.get("usage") or {}
            if int(usage.get("runs") or 0) >= 4 and not usage.get("open"):  # every pod's run counted, none left open
                self.usage.add(name)


def run(cluster: Cluster, n: int, log_dir: Path, timeout: float) -> dict:
    ns = f"scale-all-{n}-{uuid.uuid4().hex[:5]}"
    cq = f"bench-{ns}"
    g, v, p = T9K
    port = free_port()
    # This process posts for the kwok pods, from none of their addresses: the source check is off.
    flags = ("--progress-streams", "0", "--progress-endpoint", f"https://127.0.0.1:{port}", "--progress-address", "127.0.0.1",
             "--progress-port", str(port), "--progress-check-source-ip", "off")  # fmt: skip
    ctrl = Ours(cluster, ns, log_dir, extra=flags)
    ca_file = log_dir / f"progress-ca-{ns}.pem"
    rec, reporter, statuses = Recorder(t9k_state), Reporter(cluster, ns, ca_file), Statuses()
    watches: list[Watch] = []
    try:
        cluster.create_namespace(ns)
        kueue_queues(cluster, ns, cq, [("cpu", f"{4 * n * 10 + 1000}m"), ("memory", f"{4 * n * 16 + 1024}Mi")])
        pid = ctrl.start()
        cluster.request("POST", TEMPLATES.format(ns=ns), template())

        def on_pod(kind: str, pod: dict, t: float) -> None:
            rec.on_pod(kind, pod, t)
            reporter.on_pod(kind, pod, t)

        def on_job(kind: str, obj: dict, t: float) -> None:
            rec.on_job(kind, obj, t)
            statuses.on_job(kind, obj, t)

        watches = [Watch(cluster, f"/api/v1/namespaces/{ns}/pods", on_pod),
                   Watch(cluster, f"/apis/{g}/{v}/namespaces/{ns}/{p}", on_job)]  # fmt: skip
        api0, req0 = apiserver(cluster)
        cpu0, host0 = cpu_seconds(pid), host_busy_seconds()
        first, last = cluster.post_all([(f"/apis/{g}/{v}/namespaces/{ns}/{p}", job(f"j{i}")) for i in range(n)])
        wait_for(f"N={n}: every job Running", lambda: len(rec.job_running) >= n, timeout, 0.25)
        wait_for(f"N={n}: every job ended", lambda: len(rec.job_done) >= n and len(rec.pod_terminal) >= 4 * n, timeout, 0.5)
        wall = max(rec.job_done.values()) - first
        time.sleep(2)
        reporter.stop()
        api1, req1 = apiserver(cluster)
        cpu, host, rss = cpu_seconds(pid) - cpu0, host_busy_seconds() - host0, peak_rss_mb(pid)
        workloads = len(cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"])
    finally:
        for w in watches:
            w.stop()
        reporter.pool.shutdown(wait=False, cancel_futures=True)
        ctrl.stop()
        cluster.request("DELETE", f"{KUEUE}/clusterqueues/{cq}", ok=(200, 202, 404))
        cluster.delete_namespace(ns)
    delays = rec.pod_end_to_status()
    report_delays = [statuses.progress[j] - t for j, t in reporter.sent.items() if j in statuses.progress]
    by_verb: Counter[str] = Counter()
    for (verb, _), count in (req1 - req0).items():
        by_verb[verb] += count
    top = sorted(((c, verb, res) for (verb, res), c in (req1 - req0).items() if c), reverse=True)[:10]
    return {
        "n": n, "submit_s": last - first, "pods_exist_s": max(rec.pod_created.values()) - first,
        "running_from_first_s": max(rec.job_running.values()) - first, "wall_s": wall,
        "p50_ms": 1000 * pct(delays, 50), "p99_ms": 1000 * pct(delays, 99),
        "report_p50_s": pct(report_delays, 50), "report_p99_s": pct(report_delays, 99),
        "reports": dict(reporter.answers), "with_progress": len(statuses.progress), "with_usage": len(statuses.usage),
        "workloads": workloads, "rss_mb": rss, "cpu_s": cpu, "api_cpu_s": api1 - api0, "host_busy_s": host,
        "requests_by_verb": dict(by_verb), "top_requests": [f"{verb} {res} {c}" for c, verb, res in top],
        "failed": sum(1 for x in rec.job_done_phase.values() if x != "Succeeded"),
    }  # fmt: skip


def plot(results: list[dict], path: Path) -> None:
    rows = sorted(results, key=lambda r: r["n"])
    ns = [r["n"] for r in rows]
    with three_panels(path) as ax:
        ax[0].plot(ns, [r["running_from_first_s"] for r in rows], "o-", label="every job Running")
        ax[0].plot(ns, [r["pods_exist_s"] for r in rows], "s--", label="every pod exists")
        ax[0].set(title="from the first submission", xlabel="jobs (x4 pods)", ylabel="s")
        ax[0].legend()
        ax[1].plot(ns, [r["rss_mb"] for r in rows], "o-")
        ax[1].set(title="controller peak RSS", xlabel="jobs (x4 pods)", ylabel="MB")
        ax[2].plot(ns, [r["p99_ms"] / 1000 for r in rows], "o-", label="pod end -> status p99")
        ax[2].plot(ns, [r["report_p99_s"] for r in rows], "s-", label="report -> progress p99")
        ax[2].plot(ns, [r["p50_ms"] / 1000 for r in rows], "o--", label="pod end -> status p50")
        ax[2].plot(ns, [r["report_p50_s"] for r in rows], "s--", label="report -> progress p50")
        ax[2].set(title="delays", xlabel="jobs (x4 pods)", ylabel="s")
        ax[2].legend(fontsize=8)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--kubeconfig", default=str(ROOT / ".local-cluster" / "kubeconfig"))
    parser.add_argument("--timeout", type=float, default=3600, help="per N")
    parser.add_argument("--plot", help="write the curves to this PNG (needs matplotlib: the 'bench' extra)")
    parser.add_argument("--replot", metavar="JSONL", help="run nothing: plot the results recorded in JSONL (with --plot)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.replot:
        if not args.plot:
            parser.error("--replot needs --plot")
        plot([json.loads(line) for line in Path(args.replot).read_text().splitlines() if line.strip()], Path(args.plot))
        print(f"curves: {args.plot}")
        return 0
    cluster = Cluster(args.kubeconfig)
    served = cluster.request("GET", KUEUE, ok=(200, 404))
    if not isinstance(served, dict) or "workloads" not in {r["name"] for r in served.get("resources", [])}:
        raise SystemExit("Kueue's API is not served: scripts/local-cluster.sh kueue up")
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    results = []
    with pod_capacity(cluster, 4 * max(args.jobs)):
        for n in args.jobs:
            time.sleep(3)
            r = run(cluster, n, log_dir, args.timeout)
            results.append(r)
            with (log_dir / "scale_everything.jsonl").open("a") as f:
                f.write(json.dumps(r) + "\n")
            print(f"N={n}: every job Running {r['running_from_first_s']:.1f} s after the first submission; "
                  f"progress in {r['with_progress']}, usage in {r['with_usage']}, Workloads {r['workloads']}",
                  flush=True)  # fmt: skip
    print(f"\nMachine: {machine()}\n")
    print(table(["jobs", "pods", "submit (s)", "-> every pod exists (s)", "-> every job Running (s)", "-> every job ended (s)",
                 "pod end -> status p50 (ms)", "p99 (ms)", "report -> status.progress p50 (s)", "p99 (s)",
                 "jobs with progress / usage / Workload", "peak RSS (MB)", "controller CPU (s)", "API server CPU (s)",
                 "host busy (CPU-s)", "failed"],
                [[r["n"], 4 * r["n"], r["submit_s"], r["pods_exist_s"], r["running_from_first_s"], r["wall_s"],
                  r["p50_ms"], r["p99_ms"], r["report_p50_s"], r["report_p99_s"],
                  f"{r['with_progress']} / {r['with_usage']} / {r['workloads']}", r["rss_mb"], r["cpu_s"], r["api_cpu_s"],
                  r["host_busy_s"], r["failed"]] for r in results]))  # fmt: skip
    for r in results:
        verbs = ", ".join(f"{v} {c}" for v, c in sorted(r["requests_by_verb"].items(), key=lambda x: -x[1]) if c)
        print(f"\nN={r['n']}: API requests by verb: {verbs}; push answers {r['reports']}")
        print(f"N={r['n']}: the most: " + ", ".join(r["top_requests"]))
    if args.plot:
        plot(results, Path(args.plot))
        print(f"curves: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
