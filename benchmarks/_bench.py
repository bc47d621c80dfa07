"""Shared pieces of the benchmarks (vs_kubeflow.py, ceiling.py, scaling.py, kueue_latency.py, scale_everything.py...).

Raw JSON over one pooled HTTPS session, not the generated client: the driver must cost as
little as possible, since it shares two cores with the control plane and the controller.
Times are when a watch event *arrives* here (time.monotonic()), never what a controller logs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_KUBECONFIG = ROOT / ".local-cluster" / "kubeconfig"
KUBEFLOW_SH = ROOT / "benchmarks" / "kubeflow" / "kubeflow.sh"
COSCHEDULING_SH = ROOT / "benchmarks" / "coscheduling" / "coscheduling.sh"
SIM_SECONDS = 20  # kwok ends every pod this long after it runs (sim.t9k.test/duration)
CLK_TCK = os.sysconf("SC_CLK_TCK")
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "APPLY"}
_METRIC = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
_ANY_METRIC = re.compile(r"^(?P<name>[a-z_:]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")
# How often kube-scheduler tried to place a pod and a gang, by result, and the time it spent in
# its gang cycles: in all, and in finding the nodes. Neither holds the PodGroup status PATCH that
# follows each cycle in the same loop: the cycle's metric is observed before it (docs/benchmarks.md,
# session 22).
SCHEDULER_COUNTERS = ("scheduler_schedule_attempts_total", "scheduler_podgroup_schedule_attempts_total",
                      "scheduler_podgroup_scheduling_attempt_duration_seconds_sum",
                      "scheduler_podgroup_scheduling_algorithm_duration_seconds_sum",
                      "scheduler_scheduling_attempt_duration_seconds_sum", "scheduler_scheduling_attempt_duration_seconds_count",
                      "scheduler_pod_scheduling_sli_duration_seconds_sum",
                      "scheduler_pod_scheduling_sli_duration_seconds_count")  # fmt: skip


def _resource(labels: dict[str, str]) -> str:
    """A request metric's resource, with its subresource: ``pods/binding``."""
    return labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")


class Cluster:
    """The API server named by a kubeconfig with a bearer token (what scripts/local-cluster.sh writes)."""

    def __init__(self, kubeconfig: Path | str = DEFAULT_KUBECONFIG) -> None:
        cfg = yaml.safe_load(Path(kubeconfig).read_text())
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == cfg["current-context"])
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.kubeconfig = str(kubeconfig)
        self.server = cluster["server"]
        self.ca = cluster["certificate-authority"]
        self.headers = {"Authorization": f"Bearer {user['token']}", "Content-Type": "application/json"}
        self.session = self._session()

    def _session(self) -> requests.Session:
        s = requests.Session()
        s.trust_env = False  # REQUESTS_CA_BUNDLE or a proxy from the environment would override ours
        s.verify = self.ca
        s.headers.update(self.headers)
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64)
        s.mount("https://", adapter)
        return s

    def request(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Any:
        r = self.session.request(method, self.server + path, data=None if body is None else json.dumps(body), timeout=60)
        if r.status_code not in ok:
            raise RuntimeError(f"{method} {path}: {r.status_code} {r.text[:300]}")
        return r.json() if r.content and r.headers.get("Content-Type", "").startswith("application/json") else r.text

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post_all(self, path_bodies: list[tuple[str, dict]], threads: int = 16) -> tuple[float, float]:
        """POST every body from `threads` threads; (first POST sent, last answer) as monotonic times."""
        first = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda pb: self.request("POST", pb[0], pb[1]), path_bodies))
        return first, time.monotonic()

    def write_counts(self, metrics: str | None = None) -> Counter[tuple[str, str, str]]:
        """apiserver_request_total for writes, summed by (resource[/subresource], verb, code);
        from ``metrics`` (the API server's /metrics text) when the caller read it already."""
        out: Counter[tuple[str, str, str]] = Counter()
        for line in (metrics if metrics is not None else self.request("GET", "/metrics")).splitlines():
            m = _METRIC.match(line)
            if not m:
                continue
            labels = dict(_LABEL.findall(m.group("labels")))
            if labels.get("verb") not in WRITE_VERBS:
                continue
            out[(_resource(labels), labels["verb"], labels.get("code", ""))] += int(float(m.group("value")))
        return out

    def scheduler_counters(self, prefixes: tuple[str, ...] = SCHEDULER_COUNTERS, port: str | None = None) -> Counter[str]:
        """kube-scheduler's own counters whose names start with one of ``prefixes``, summed by
        metric and ``result`` (its /metrics, on the loopback port scripts/local-cluster.sh gives
        it, read with this kubeconfig's token: the scheduler checks it with the API server).
        ``port``: another scheduler's (benchmarks/coscheduling). Empty when the scheduler does
        not answer (a cluster started before it was given its authentication kubeconfig)."""
        port = port or os.environ.get("T9K_PORT_SCHEDULER", "30259")
        out: Counter[str] = Counter()
        try:  # it serves with the API server's certificate (scripts/local-cluster.sh)
            r = requests.get(f"https://127.0.0.1:{port}/metrics", headers=self.headers, verify=self.ca, timeout=10)
        except requests.RequestException:
            return out
        if r.status_code != 200:
            return out
        for line in r.text.splitlines():
            m = _ANY_METRIC.match(line)
            if m and m.group("name").startswith(prefixes):
                result = dict(_LABEL.findall(m.group("labels") or "")).get("result")
                out[m.group("name") + (f"{{{result}}}" if result else "")] += float(m.group("value"))
        return out

    def apiserver_latency(self, metrics: str | None = None) -> Counter[str]:
        """The API server's latency sums and counts, over its life, of the writes a wave of jobs is
        made of (pod, Service and binding creations, status writes), by resource and verb; from
        ``metrics`` as write_counts. (The local cluster runs it without API Priority and Fairness,
        so no request waits in a queue.)"""
        out: Counter[str] = Counter()
        for line in (metrics if metrics is not None else self.request("GET", "/metrics")).splitlines():
            m = _ANY_METRIC.match(line)
            if not m or m.group("name") not in (
                "apiserver_request_duration_seconds_sum",
                "apiserver_request_duration_seconds_count",
            ):
                continue
            labels = dict(_LABEL.findall(m.group("labels") or ""))
            if labels.get("verb") in WRITE_VERBS:
                out[f"latency {_resource(labels)} {labels['verb']} {m.group('name').rsplit('_', 1)[1]}"] += float(
                    m.group("value")
                )
        return out

    def profile(self, component: str, seconds: int, out: Path) -> threading.Thread:
        """Start a CPU profile of the API server, kube-scheduler or kube-controller-manager (their
        /debug/pprof, on by default; the latter two on their loopback ports, to this kubeconfig's
        token) for ``seconds``, written to ``out`` when it ends (``go tool pprof -top out`` reads it)."""
        ports = {"kube-scheduler": os.environ.get("T9K_PORT_SCHEDULER", "30259"),
                 "kube-controller-manager": os.environ.get("T9K_PORT_KCM", "30257")}  # fmt: skip
        base = self.server if component == "kube-apiserver" else f"https://127.0.0.1:{ports[component]}"

        def fetch() -> None:
            r = requests.get(f"{base}/debug/pprof/profile?seconds={seconds}", headers=self.headers, verify=self.ca,
                             timeout=seconds + 30)  # fmt: skip
            r.raise_for_status()
            out.write_bytes(r.content)

        thread = threading.Thread(target=fetch, name=f"pprof {component}", daemon=True)
        thread.start()
        return thread

    def create_namespace(self, name: str) -> None:
        self.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        wait_for(f"serviceaccount in {name}", lambda: self.get(f"/api/v1/namespaces/{name}/serviceaccounts")["items"], 60)

    def delete_namespace(self, name: str, wait: bool = True) -> None:
        self.request("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404))
        if wait:
            wait_for(f"namespace {name} gone", lambda: self.session.get(
                f"{self.server}/api/v1/namespaces/{name}", timeout=10).status_code == 404, 600)  # fmt: skip

    def pod_count(self) -> int:
        return len(self.get("/api/v1/pods?limit=5000")["items"])


class Watch(threading.Thread):
    """One watch stream; calls on_event(type, object, arrival) for every event. Opened before
    start() returns, so nothing submitted afterwards is missed; a stream the server ends is
    opened again from the last resourceVersion seen."""

    def __init__(self, cluster: Cluster, path: str, on_event: Callable[[str, dict, float], None]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.path, self.on_event = cluster, path, on_event
        self.session = cluster._session()  # its own connection: a watch holds one for its lifetime
        self.rv = ""
        self.reopened = 0
        self.stopped = False
        self.resp = self._open()
        self.start()

    def _open(self) -> requests.Response:
        sep = "&" if "?" in self.path else "?"
        rv = f"&resourceVersion={self.rv}" if self.rv else ""
        deadline = time.monotonic() + 60
        while True:
            resp = self.session.get(f"{self.cluster.server}{self.path}{sep}watch=1&timeoutSeconds=3600{rv}",
                                    stream=True, timeout=(10, 3700))  # fmt: skip
            # 429: the API server's watch cache for a just-installed CRD is still initializing.
            if resp.status_code not in (429, 503) or time.monotonic() > deadline:
                resp.raise_for_status()
                return resp
            resp.close()
            time.sleep(0.5)

    def run(self) -> None:
        while not self.stopped:
            try:
                for line in self.resp.iter_lines(chunk_size=None):
                    if self.stopped:
                        return
                    if line:
                        ev = json.loads(line)
                        if ev["type"] == "ERROR":  # e.g. 410 Gone: the benchmark's figures would have a hole
                            raise SystemExit(f"watch {self.path}: {ev['object'].get('message')}")
                        self.rv = ev["object"]["metadata"].get("resourceVersion", self.rv)
                        self.on_event(ev["type"], ev["object"], time.monotonic())
            except (requests.RequestException, OSError, ValueError):
                if self.stopped:
                    return
            while not self.stopped:
                try:
                    self.resp = self._open()
                    self.reopened += 1
                    break
                except (requests.RequestException, OSError):
                    time.sleep(0.5)

    def stop(self) -> None:
        self.stopped = True
        # Closing the response would wait for the reader thread's lock; shutting the socket
        # down wakes that reader first.
        sock = getattr(getattr(self.resp.raw, "connection", None), "sock", None)
        try:
            if isinstance(sock, socket.socket):
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.join(5)
        self.resp.close()
        self.session.close()


@dataclass
class Recorder:
    """Arrival times of pod and job events in one namespace: when each first reached a state."""

    job_state: Callable[[dict], str | None]  # "Running", "Succeeded", "Failed" or None
    pod_created: dict[str, float] = field(default_factory=dict)
    pod_bound: dict[str, float] = field(default_factory=dict)  # its spec.nodeName first seen: the scheduler's part done
    pod_running: dict[str, float] = field(default_factory=dict)
    pod_terminal: dict[str, float] = field(default_factory=dict)
    pod_job: dict[str, str] = field(default_factory=dict)
    job_running: dict[str, float] = field(default_factory=dict)
    job_done: dict[str, float] = field(default_factory=dict)
    job_done_phase: dict[str, str] = field(default_factory=dict)
    job_status_writes: Counter[str] = field(default_factory=Counter)
    job_events: dict[str, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_pod(self, kind: str, pod: dict, t: float) -> None:
        name = pod["metadata"]["name"]
        phase = (pod.get("status") or {}).get("phase")
        with self.lock:
            self.pod_created.setdefault(name, t)
            self.pod_job.setdefault(name, name.rsplit("-", 2)[0])  # <job>-<type>-<index>
            if (pod.get("spec") or {}).get("nodeName"):
                self.pod_bound.setdefault(name, t)
            if phase == "Running":
                self.pod_running.setdefault(name, t)
            elif phase in ("Succeeded", "Failed"):
                self.pod_running.setdefault(name, t)
                self.pod_terminal.setdefault(name, t)

    def on_job(self, kind: str, job: dict, t: float) -> None:
        name = job["metadata"]["name"]
        state = self.job_state(job)
        with self.lock:
            if kind == "MODIFIED":
                self.job_status_writes[name] += 1
                self.job_events.setdefault(name, []).append(t)
            if state in ("Running", "Succeeded", "Failed"):
                self.job_running.setdefault(name, t)
            if state in ("Succeeded", "Failed"):
                self.job_done.setdefault(name, t)
                self.job_done_phase.setdefault(name, state)

    def decision_delays(self) -> list[float]:
        """Per finished job: its end minus the last of its pods' ends that came before it (the
        pod event the controller had to react to)."""
        ends: dict[str, list[float]] = {}
        for pod, t in self.pod_terminal.items():
            ends.setdefault(self.pod_job[pod], []).append(t)
        out = []
        for job, done in self.job_done.items():
            before = [t for t in ends.get(job, []) if t <= done]
            if before:
                out.append(done - max(before))
        return out

    def pod_end_to_status(self) -> list[float]:
        """Per ended pod: from its end to the next write of its job (a MODIFIED event), which is
        the status write that reports it."""
        out = []
        for pod, t in self.pod_terminal.items():
            later = [e for e in self.job_events.get(self.pod_job[pod], []) if e >= t]
            if later:
                out.append(min(later) - t)
        return out


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 0.1) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)
    return time.monotonic()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def component_cpu_seconds() -> dict[str, float]:
    """Each control-plane process's CPU seconds so far (the pids scripts/local-cluster.sh saved,
    and the Coscheduling scheduler's while benchmarks/coscheduling runs it), to split a run's
    host load by who spent it."""
    pids = {name: ROOT / ".local-cluster" / "pids" / name
            for name in ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")}  # fmt: skip
    pids["coscheduling"] = ROOT / ".local-cluster" / "coscheduling" / "pid"
    out: dict[str, float] = {}
    for name, path in pids.items():
        try:
            out[name] = cpu_seconds(int(path.read_text()))
        except (OSError, ValueError):
            continue
    return out


def host_busy_seconds() -> float:
    """All CPUs' non-idle time so far (/proc/stat), to report how loaded the host was."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(parts) - parts[3] - parts[4]) / CLK_TCK  # minus idle and iowait


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Ours:
    """`airflow-t9k controller` as a user runs it, narrowed to one kind and one namespace."""

    name = "ours"

    def __init__(self, cluster: Cluster, namespace: str, log_dir: Path, kind: str = "PyTorchTrainingJob",
                 extra: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.port = free_port()
        self.cluster = cluster
        exe = ROOT / ".venv" / "bin" / "airflow-t9k"
        self.args = [str(exe) if exe.exists() else sys.executable, *([] if exe.exists() else ["-m", "airflow_t9k.cli"]),
                     "controller", "--kubeconfig", cluster.kubeconfig, "--health-port", str(self.port),
                     "--health-address", "127.0.0.1", "--log-level", "INFO", "--kind", kind, "-n", namespace, *extra]  # fmt: skip
        self.log_path = log_dir / f"ours-{namespace}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        # T9K_BENCH_SOURCE=<dir holding another airflow_t9k/>: run that version of the controller
        # (e.g. `git archive <rev> airflow_t9k | tar -x -C DIR`), for before/after figures.
        self.env = dict(os.environ)
        # T9K_BENCH_ARGS="--workers 8": more flags for our controller, to compare settings.
        self.args += shlex.split(os.environ.get("T9K_BENCH_ARGS", ""))
        # /metrics on the probes' listener (the benchmarks read both there). A version from before
        # the metrics listener existed served it there anyway and does not know the flag.
        source_cli = Path(os.environ.get("T9K_BENCH_SOURCE") or ROOT) / "airflow_t9k" / "controller" / "cli.py"
        if "--metrics-port" in source_cli.read_text():
            self.args += ["--metrics-port", str(self.port)]
        if source := os.environ.get("T9K_BENCH_SOURCE"):
            python = ROOT / ".venv" / "bin" / "python"
            self.args = [
                str(python if python.exists() else sys.executable),
                "-m",
                "airflow_t9k.cli",
                *self.args[self.args.index("controller") :],
            ]
            self.env["PYTHONPATH"] = source
        self.cwd = os.environ.get("T9K_BENCH_SOURCE") or ROOT  # `-m` puts the working directory first on sys.path

    def start(self) -> int:
        install_crds(self.cluster)  # a fresh cluster has none; the controller refuses to start without them
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.cwd, env=self.env)
        wait_for("our controller ready", lambda: self._ready(), 60)
        return self.proc.pid

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise SystemExit(f"our controller exited ({self.proc.returncode}); log: {self.log_path}")
        try:
            return requests.get(f"http://127.0.0.1:{self.port}/readyz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def metrics(self) -> dict[str, float]:
        """Its own counters (airflow_t9k_controller_total) by their `what` label."""
        out = {}
        for line in requests.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text.splitlines():
            if line.startswith("airflow_t9k_controller_total{") and 'what="' in line:
                name, value = line.rsplit(" ", 1)
                out[name.split('what="', 1)[1].split('"', 1)[0]] = float(value)
        return out

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if log := getattr(self, "log", None):
            log.close()


def median(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (so the output pastes into docs/benchmarks.md as printed)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "-" if v != v else f"{v:.2f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "?")  # fmt: skip
    mem = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    return f"{os.cpu_count()} CPUs ({model}), {mem:.0f} GiB RAM"


BENCH_NODE_PODS = 1000


def node_capacity(cluster: Cluster) -> int:
    total = 0
    for node in cluster.get("/api/v1/nodes?labelSelector=type%3Dkwok")["items"]:
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions") or [])
        if ready and not node.get("spec", {}).get("unschedulable"):
            pods = str(node["status"]["allocatable"]["pods"])  # a quantity: the API server writes 1000 as "1k"
            total += int(pods[:-1]) * 1000 if pods.endswith("k") else int(pods)
    return total


@contextlib.contextmanager
def pod_capacity(cluster: Cluster, need: int, allow_extra: bool = True) -> Iterator[None]:
    """Room for ``need`` pods: fake kwok nodes `kwok-bench-<i>` (1,000 pods each; kwok manages
    every node, so no restart is needed) added while the block runs, deleted after it."""
    have = node_capacity(cluster)
    added: list[str] = []
    try:
        if need > have:
            if not allow_extra:
                raise SystemExit(f"{need} pods need more than the {have} the kwok nodes hold")
            for i in range(-(-(need - have) // BENCH_NODE_PODS)):
                name = f"kwok-bench-{i}"
                res = {"cpu": "256", "memory": "2Ti", "pods": str(BENCH_NODE_PODS)}
                cluster.request("POST", "/api/v1/nodes", {
                    "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                 "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok",
                                            "bench": "scaling"}},
                    "status": {"capacity": res, "allocatable": res}}, ok=(201, 409))  # fmt: skip
                added.append(name)
            wait_for("extra kwok nodes Ready", lambda: node_capacity(cluster) >= need, 120, 0.5)
            print(
                f"added {len(added)} kwok nodes ({BENCH_NODE_PODS} pods each): {have} -> {node_capacity(cluster)} pods",
                flush=True,
            )
        yield
    finally:
        for name in added:
            cluster.request("DELETE", f"/api/v1/nodes/{name}", ok=(200, 404))


def install_crds(cluster: Cluster) -> None:
    """Our CRDs, created or brought up to date, with the tests' own helper."""
    sys.path.insert(0, str(ROOT))
    from kubernetes import config

    from tests.support.jobs import install_crds as install

    install(config.new_client_from_config(config_file=cluster.kubeconfig))


KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def kueue_queues(cluster: Cluster, ns: str, cq: str, quota: list[tuple[str, str]]) -> None:
    """ClusterQueue ``cq`` for namespace ``ns`` alone, the `default` flavor with ``quota``
    ((resource, nominal quota) pairs), and LocalQueue `bench` in ``ns`` pointing at it."""
    cluster.request("POST", f"{KUEUE}/clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                 "resourceGroups": [{"coveredResources": [r for r, _ in quota], "flavors": [
                     {"name": "default", "resources": [{"name": r, "nominalQuota": q} for r, q in quota]}]}]}})  # fmt: skip
    cluster.request("POST", f"{KUEUE}/namespaces/{ns}/localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "bench"},
        "spec": {"clusterQueue": cq}})  # fmt: skip
    wait_for("LocalQueue", lambda: cluster.get(f"{KUEUE}/namespaces/{ns}/localqueues")["items"], 30)


@contextlib.contextmanager
def three_panels(path: Path) -> Iterator[Any]:
    """Three side-by-side axes to draw on (needs matplotlib: the 'bench' extra); on leaving, each
    gets a grid and a y axis from 0, and the figure is written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    yield ax
    for a in ax:
        a.grid(alpha=0.3)
        a.set_ylim(bottom=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
