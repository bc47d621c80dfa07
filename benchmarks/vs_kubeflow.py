"""Our controller against Kubeflow's training operator, side by side on the local cluster.

    scripts/local-cluster.sh up
    benchmarks/kubeflow/kubeflow.sh build        # once: Kubeflow v1.8.1 into ~/.cache/airflow-t9k
    .venv/bin/python benchmarks/vs_kubeflow.py --jobs 100 200 --rounds 3

N jobs of 1 master + 3 workers, the same pod template (container `pytorch`, kwok ends each pod
Succeeded 20 s after it runs: annotation sim.t9k.test/duration), as Kubeflow PyTorchJobs and
as our PyTorchTrainingJobs. One controller runs at a time, in a fresh namespace it alone
watches; the order of the variants alternates over the rounds. Variants:

  kf        Kubeflow as it ships: client QPS 20 / burst 30, 1 worker thread, debug log
  kf-tuned  Kubeflow with its limits raised to ours: no client-side rate limit, 16 threads
  kf-gang   kf-tuned ganged as Kubeflow gangs without Volcano: --gang-scheduler-name naming a second
            kube-scheduler with the scheduler-plugins' Coscheduling (benchmarks/coscheduling, run
            only during these runs), one scheduling.x-k8s.io PodGroup per job
  ours      airflow-t9k controller --kind PyTorchTrainingJob as it ships (16 workers, no client-side
            limit; gang scheduling where the cluster serves PodGroups, as the local cluster does)
  ours-nogang  the same with --gang-scheduling=off: the same work as Kubeflow's, whose PyTorchJob
            gets no gang without Volcano or scheduler-plugins (compare ours with kf-gang, ours-nogang
            with kf-tuned)

Printed per N (medians over rounds): submit -> every pod exists / every pod Running / every
job Running (from the last submission), last pod ended -> every job Succeeded, each job's end
after its last pod end (p50/max), API writes per job by resource and verb (the API server's
apiserver_request_total over the run, all clients; events split by who reported them),
controller CPU seconds and peak RSS (/proc), and the ratios ours / Kubeflow. After each run,
kube-scheduler's own counters over it: pod and gang attempts by result, and the seconds of its
gang cycles (its PodGroup status PATCH, made after the cycle's metric, is not in them); the API
server's mean latency of the wave's writes; kube-scheduler's time per attempt and from queue to
bound. The report adds every job Running from the first POST and the host's CPU seconds by
process. --profile SECONDS keeps CPU profiles of the API server, kube-scheduler and
kube-controller-manager (docs/benchmarks.md, "Session 31"). --neighbour TASKS runs every round
beside a real Airflow holding TASKS deferred sensors, and adds its CPU to the split (Session 32).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (
    COSCHEDULING_SH,
    KUBEFLOW_SH,
    ROOT,
    SIM_SECONDS,
    Cluster,
    Ours,
    Recorder,
    Watch,
    component_cpu_seconds,
    cpu_seconds,
    host_busy_seconds,
    machine,
    median,
    pct,
    peak_rss_mb,
    pod_capacity,
    table,
    wait_for,
)  # fmt: skip
from airflow_neighbour import Neighbour, airflow_neighbour

TEMPLATE = {
    "metadata": {"annotations": {"sim.t9k.test/duration": f"{SIM_SECONDS}s"}},
    "spec": {"containers": [{"name": "pytorch", "image": "busybox", "command": ["sh", "-c", f"sleep {SIM_SECONDS}"]}]},
}
KF = ("kubeflow.org", "v1", "pytorchjobs")
T9K = ("batch.tensorstack.dev", "v1beta1", "pytorchtrainingjobs")
COSCHEDULER = "scheduler-plugins-scheduler"  # the profile benchmarks/coscheduling/coscheduling.sh serves
VARIANTS = {"kf": [], "kf-tuned": ["--kube-api-qps=-1", "--controller-threads=16"],
            "kf-gang": ["--kube-api-qps=-1", "--controller-threads=16", f"--gang-scheduler-name={COSCHEDULER}"],
            "ours": [], "ours-nogang": ["--gang-scheduling=off"]}  # fmt: skip
# Events not written by the controller under test (kwok's simulated container events, the schedulers').
OTHER_REPORTERS = {"kwok_controller", "kwok", "default-scheduler", COSCHEDULER, "kubelet", ""}


def kubeflow_job(name: str) -> dict:
    spec = {t: {"replicas": n, "restartPolicy": "OnFailure", "template": TEMPLATE} for t, n in (("Master", 1), ("Worker", 3))}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": spec}}  # fmt: skip


def t9k_job(name: str) -> dict:
    specs = [
        {"type": t, "replicas": n, "restartPolicy": "OnFailure", "template": TEMPLATE} for t, n in (("master", 1), ("worker", 3))
    ]
    # runPolicy.cleanUpPolicy None: Kubeflow's default cleanPodPolicy, so both do the same work. Ours
    # defaults to Unfinished (seed 001), which deletes a worker kwok has not ended yet when the
    # master's success ends the job: that pod never ends, and the wait for every pod's end never returned.
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": specs, "runPolicy": {"cleanUpPolicy": "None"}}}  # fmt: skip


def kubeflow_state(job: dict) -> str | None:
    true = {c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    for state in ("Succeeded", "Failed", "Running"):
        if state in true:
            return state
    return None


def t9k_state(job: dict) -> str | None:
    return (job.get("status") or {}).get("phase")


class Kubeflow:
    def __init__(self, name: str, flags: list[str], namespace: str) -> None:
        self.name, self.flags, self.namespace = name, flags, namespace
        # Its gang's scheduler runs only during its own runs: the others' hosts do not carry it.
        self.gang = any(f.startswith("--gang-scheduler-name=") for f in flags)

    def start(self) -> int:
        subprocess.run([str(KUBEFLOW_SH), "stop"], check=True)  # one left by an interrupted run watches another namespace
        subprocess.run([str(COSCHEDULING_SH), "stop"], check=True)
        if self.gang:
            subprocess.run([str(COSCHEDULING_SH), "start"], check=True)
        subprocess.run([str(KUBEFLOW_SH), "start", f"--namespace={self.namespace}", *self.flags], check=True)
        return int(subprocess.run([str(KUBEFLOW_SH), "pid"], check=True, capture_output=True, text=True).stdout)

    def scheduler_port(self) -> str | None:
        return os.environ.get("T9K_PORT_COSCHEDULING", "39259") if self.gang else None

    def stop(self) -> None:
        subprocess.run([str(KUBEFLOW_SH), "stop"], check=True)
        subprocess.run([str(COSCHEDULING_SH), "stop"], check=True)


def apiserver_pid() -> int | None:
    try:
        return int((ROOT / ".local-cluster" / "pids" / "kube-apiserver").read_text())
    except (OSError, ValueError):
        return None


def ended(rec: Recorder, n: int, watches: list[Watch]) -> bool:
    if not all(w.is_alive() for w in watches):  # its error went to stderr; waiting on would only time out
        raise SystemExit("a watch ended early: the figures would have a hole")
    return len(rec.job_done) >= n and len(rec.pod_terminal) >= 4 * n


def run_once(cluster: Cluster, variant: str, n: int, log_dir: Path, timeout: float, profile: int = 0,
             tag: str = "", neighbour: Neighbour | None = None) -> dict:  # fmt: skip
    """One controller, one namespace, N jobs from submission until every job ended; with
    ``profile``, CPU profiles of the API server, kube-scheduler and kube-controller-manager over
    that many seconds from the first submission, in ``log_dir`` (<variant>-<N>-<tag>-<component>.pprof)."""
    ns = f"vs-{variant}-{uuid.uuid4().hex[:5]}"
    group, version, plural = KF if variant.startswith("kf") else T9K
    cluster.create_namespace(ns)
    ctrl = (
        Kubeflow(variant, VARIANTS[variant], ns)
        if variant.startswith("kf")
        else Ours(cluster, ns, log_dir, extra=tuple(VARIANTS[variant]))
    )
    rec = Recorder(kubeflow_state if variant.startswith("kf") else t9k_state)
    body = kubeflow_job if variant.startswith("kf") else t9k_job
    watches: list[Watch] = []
    try:
        started = time.monotonic()
        pid = ctrl.start()
        ready_s = time.monotonic() - started
        watches = [Watch(cluster, f"/api/v1/namespaces/{ns}/pods", rec.on_pod),
                   Watch(cluster, f"/apis/{group}/{version}/namespaces/{ns}/{plural}", rec.on_job)]  # fmt: skip
        metrics0, cpu0, host0, parts0 = (
            cluster.request("GET", "/metrics"),
            cpu_seconds(pid),
            host_busy_seconds(),
            {**component_cpu_seconds(), **({"airflow": neighbour.cpu_seconds()} if neighbour else {})},
        )
        # The scheduler that binds this variant's pods: kf-gang's are the Coscheduling scheduler's.
        sched_port = ctrl.scheduler_port() if isinstance(ctrl, Kubeflow) else None
        sched0 = cluster.scheduler_counters(port=sched_port)
        profiles = [cluster.profile(c, profile, log_dir / f"{variant}-{n}-{tag}-{c}.pprof")
                    for c in ("kube-apiserver", "kube-scheduler", "kube-controller-manager") if profile]  # fmt: skip
        first, last = cluster.post_all([(f"/apis/{group}/{version}/namespaces/{ns}/{plural}", body(f"j{i}")) for i in range(n)])
        try:
            wait_for(f"{variant}: every job ended", lambda: ended(rec, n, watches), timeout, 0.25)
        except SystemExit as exc:
            raise SystemExit(f"{exc}: {len(rec.pod_created)} pods seen, {len(rec.pod_running)} ran, {len(rec.pod_terminal)} "
                             f"ended; {len(rec.job_running)} jobs Running, {len(rec.job_done)} ended") from None  # fmt: skip
        time.sleep(2)  # trailing writes (the last events) land inside the window
        for thread in profiles:
            thread.join()
        metrics1, cpu1, host1, parts1 = (
            cluster.request("GET", "/metrics"),
            cpu_seconds(pid),
            host_busy_seconds(),
            {**component_cpu_seconds(), **({"airflow": neighbour.cpu_seconds()} if neighbour else {})},
        )
        sched = cluster.scheduler_counters(port=sched_port) - sched0
        before, after = cluster.write_counts(metrics0), cluster.write_counts(metrics1)
        latency = cluster.apiserver_latency(metrics1) - cluster.apiserver_latency(metrics0)
        # The host's CPU over the run by who spent it; "rest" is this driver, its watches and anything else.
        by_process = {
            **{k: parts1[k] - parts0[k] for k in parts1 if k in parts0},
            "controller": cpu1 - cpu0,
            "host": host1 - host0,
        }
        rss = peak_rss_mb(pid)
        events = cluster.get(f"/api/v1/namespaces/{ns}/events")["items"]
        own = ctrl.metrics() if isinstance(ctrl, Ours) else {}
    finally:
        for w in watches:
            w.stop()
        ctrl.stop()
        cluster.delete_namespace(ns)
    writes = {f"{r} {v} {c}": after[(r, v, c)] - before.get((r, v, c), 0) for (r, v, c) in after
              if after[(r, v, c)] - before.get((r, v, c), 0) > 0}  # fmt: skip
    reporters: Counter[str] = Counter()
    for e in events:
        who = e.get("reportingComponent") or (e.get("source") or {}).get("component") or ""
        reporters[who] += max(1, int(e.get("count") or 1))
    ctrl_events = sum(c for who, c in reporters.items() if who not in OTHER_REPORTERS)
    delays = rec.decision_delays()
    failed = sum(1 for p in rec.job_done_phase.values() if p != "Succeeded")
    return {
        "variant": variant, "n": n, "ready_s": ready_s, "submit_s": last - first,
        "pods_exist_s": max(rec.pod_created.values()) - last,
        "pods_bound_s": max(rec.pod_bound.values()) - last,
        "pods_running_s": max(rec.pod_running.values()) - last,
        # Per pod, p50: created -> bound to a node (kube-scheduler), bound -> Running (kwok).
        "pod_to_bound_p50_s": pct([rec.pod_bound[p] - rec.pod_created[p] for p in rec.pod_bound], 50),
        "pod_bound_to_running_p50_s": pct([rec.pod_running[p] - t for p, t in rec.pod_bound.items() if p in rec.pod_running], 50),
        "pods_running_from_first_s": max(rec.pod_running.values()) - first,
        "jobs_running_s": max(rec.job_running.values()) - last,
        "jobs_running_from_first_s": max(rec.job_running.values()) - first,
        "done_after_pods_s": max(rec.job_done.values()) - max(rec.pod_terminal.values()),
        "decision_p50_s": pct(delays, 50), "decision_max_s": max(delays) if delays else float("nan"),
        "ctrl_cpu_s": cpu1 - cpu0, "ctrl_rss_mb": rss, "apiserver_cpu_s": by_process.get("kube-apiserver", float("nan")),
        "other_load_cpu_s": (host1 - host0) - (cpu1 - cpu0) - by_process.get("kube-apiserver", 0.0),
        "writes": writes, "event_reporters": dict(reporters), "ctrl_events": ctrl_events,
        "status_modified_events": sum(rec.job_status_writes.values()), "failed_jobs": failed, "plural": plural,
        "own_metrics": own, "scheduler": dict(sched), "apiserver": dict(latency), "cpu_by_process": by_process,
    }  # fmt: skip


def scheduler_line(counts: dict[str, float]) -> str:
    """kube-scheduler's attempts in the run, pods and gangs by result, and its time in gang cycles."""

    def by_result(metric: str) -> str:
        return ", ".join(f"{k[len(metric) + 1 : -1]} {v:.0f}" for k, v in sorted(counts.items()) if k.startswith(metric + "{"))

    pods, gangs = by_result("scheduler_schedule_attempts_total"), by_result("scheduler_podgroup_schedule_attempts_total")
    cycles = sum(v for k, v in counts.items() if k.startswith("scheduler_podgroup_scheduling_attempt_duration_seconds_sum"))
    finding = counts.get("scheduler_podgroup_scheduling_algorithm_duration_seconds_sum", 0.0)
    return (f"pod attempts: {pods or 'none'}; gang attempts: {gangs or 'none'}; {cycles:.2f} s in gang cycles, "
            f"{finding:.2f} s of it finding nodes")  # fmt: skip


def mean_ms(counts: dict[str, float], prefix: str) -> str:
    """``prefix``'s mean in milliseconds and its count, from a ``<prefix> sum`` and ``<prefix> count``."""
    n = counts.get(f"{prefix} count", 0.0)
    return f"{1000 * counts.get(f'{prefix} sum', 0.0) / n:.0f} ms x {n:.0f}" if n else "none"


def where_time_went(r: dict) -> str:
    """The API server's latency of a wave's writes, then kube-scheduler's time per attempt and per
    pod (its SLI: queue to bound, without gates)."""
    api, sched = r.get("apiserver") or {}, r.get("scheduler") or {}
    writes = [("pods POST", "latency pods POST"), ("binding", "latency pods/binding POST"),
              ("services POST", "latency services POST"), ("pods/status PATCH", "latency pods/status PATCH")]  # fmt: skip
    lat = ", ".join(f"{name} {mean_ms(api, key)}" for name, key in writes)
    folded: Counter[str] = Counter()  # the scheduler's keys carry {result}: summed over results
    for key, value in sched.items():
        folded[key.split("{")[0].replace("_seconds_", " ")] += value
    attempt = mean_ms(folded, "scheduler_scheduling_attempt_duration")
    sli = mean_ms(folded, "scheduler_pod_scheduling_sli_duration")
    return f"API server latency: {lat}\n  kube-scheduler: attempt {attempt}, queue to bound {sli}"


def writes_per_job(r: dict) -> dict[str, float]:
    """The controller's own writes per job, by resource and verb (409s counted apart)."""
    n, plural = r["n"], r["plural"]
    out: Counter[str] = Counter()
    for key, count in r["writes"].items():
        res, verb, code = key.split(" ")
        if res == plural:
            continue  # the driver's own POSTs
        if res.startswith(plural):
            res = res.replace(plural, "job", 1)
        elif res not in ("pods", "services", "events", "podgroups"):  # podgroups/status: the scheduler's
            continue
        if res == "events":
            continue
        if res == "pods" and verb != "POST":
            continue  # pods PATCH/status are kwok's, pods/binding the scheduler's
        out[f"{res} {verb}" + (" (409)" if code == "409" else "")] += count / n
    out["events (the controller's)"] = r["ctrl_events"] / n
    out["TOTAL"] = sum(v for k, v in out.items() if k != "TOTAL")
    return dict(out)


TIME_COLUMNS = [
    ("pods_exist_s", "every pod exists (s)"), ("pods_running_s", "every pod Running (s)"),
    ("jobs_running_s", "every job Running (s)"), ("jobs_running_from_first_s", "... from the first POST (s)"),
    ("done_after_pods_s", "last pod ended -> every job Succeeded (s)"),
    ("decision_p50_s", "job end after its last pod end p50 (s)"), ("decision_max_s", "... max (s)"),
    ("ctrl_cpu_s", "controller CPU (s)"), ("ctrl_rss_mb", "controller peak RSS (MB)"),
]  # fmt: skip


def report(results: list[dict]) -> str:
    out = []
    for n in sorted({r["n"] for r in results}):
        rs = [r for r in results if r["n"] == n]
        variants = [v for v in VARIANTS if any(r["variant"] == v for r in rs)]
        med = {v: {k: median([r[k] for r in rs if r["variant"] == v]) for k, _ in TIME_COLUMNS + [
            ("submit_s", ""), ("apiserver_cpu_s", ""), ("other_load_cpu_s", ""), ("ready_s", "")]} for v in variants}  # fmt: skip
        wpj = {v: [writes_per_job(r) for r in rs if r["variant"] == v] for v in variants}
        wmed = {v: {k: median([w.get(k, 0.0) for w in wpj[v]]) for k in set().union(*wpj[v])} for v in variants}
        runs = {v: sum(1 for r in rs if r["variant"] == v) for v in variants}
        out.append(f"\n### N = {n} jobs x 4 replicas ({4 * n} pods, {4 * n} Services): medians over rounds\n")
        out.append(table(["variant", "runs", "submit (s)", *(h for _, h in TIME_COLUMNS), "controller writes / job",
                          "API server CPU (s)", "other load on host (CPU s)", "failed jobs"],
                         [[v, runs[v], med[v]["submit_s"], *(med[v][k] for k, _ in TIME_COLUMNS), wmed[v]["TOTAL"],
                           med[v]["apiserver_cpu_s"], med[v]["other_load_cpu_s"],
                           sum(r["failed_jobs"] for r in rs if r["variant"] == v)] for v in variants]))  # fmt: skip
        keys = sorted(set().union(*(wmed[v] for v in variants)) - {"TOTAL"}) + ["TOTAL"]
        out.append(f"\nThe controller's API writes per job (N = {n}, medians; events: objects x count reported by it):\n")
        out.append(table(["writes / job", *variants], [[k, *(wmed[v].get(k, 0.0) for v in variants)] for k in keys]))
        cpu = {v: [r.get("cpu_by_process") or {} for r in rs if r["variant"] == v] for v in variants}
        procs = ["kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok", "controller"]
        if any("coscheduling" in c for v in variants for c in cpu[v]):
            procs.insert(4, "coscheduling")
        if any("airflow" in c for v in variants for c in cpu[v]):
            procs.append("airflow")
        if all(cpu[v] and all(cpu[v]) for v in variants):
            rows = [[p, *(median([c.get(p, float("nan")) for c in cpu[v]]) for v in variants)] for p in procs]
            rows.append(
                [
                    "rest (this driver, its watches, anything else)",
                    *(median([c["host"] - sum(c.get(p, 0.0) for p in procs) for c in cpu[v]]) for v in variants),
                ]
            )
            rows.append(["host", *(median([c["host"] for c in cpu[v]]) for v in variants)])  # fmt: skip
            out.append(f"\nThe host's CPU seconds over the run by process (N = {n}, medians):\n")
            out.append(table(["process", *variants], rows))
        pairs = [(o, k) for o in variants if o.startswith("ours") for k in variants if k.startswith("kf")]
        if pairs:
            rows = [[h, *(med[o][k] / med[v][k] if med[v][k] else float("nan") for o, v in pairs)] for k, h in TIME_COLUMNS
                    if k not in ("decision_max_s",)]  # fmt: skip
            rows.append(["controller writes / job", *(wmed[o]["TOTAL"] / wmed[v]["TOTAL"] for o, v in pairs)])
            out.append(f"\nRatios ours / Kubeflow (N = {n}; < 1: ours is faster or leaner):\n")
            out.append(table(["metric", *(f"{o} / {v}" for o, v in pairs)], rows))
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 200], help="N, one or more")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {','.join(VARIANTS)}")
    parser.add_argument("--kubeconfig", default=str(ROOT / ".local-cluster" / "kubeconfig"))
    parser.add_argument("--timeout", type=float, default=900, help="per run")
    parser.add_argument("--profile", type=int, default=0, metavar="SECONDS",
                        help="CPU profiles of the API server, kube-scheduler and kube-controller-manager over each run's first "
                             "SECONDS (pprof files beside --out; `go tool pprof -top FILE`)")  # fmt: skip
    parser.add_argument("--neighbour", type=int, default=0, metavar="TASKS",
                        help="run everything beside a real Airflow (api-server, scheduler, dag-processor, triggerer) "
                             "holding TASKS deferred sensors (benchmarks/airflow_neighbour.py)")  # fmt: skip
    parser.add_argument("--out", default=str(ROOT / ".local-cluster" / "bench-logs" / f"vs_kubeflow-{int(time.time())}.jsonl"))
    args = parser.parse_args()
    variants = args.variants.split(",")
    if unknown := set(variants) - set(VARIANTS):
        parser.error(f"unknown variant(s): {', '.join(sorted(unknown))}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up in `finally` blocks
    cluster = Cluster(args.kubeconfig)
    if any(v.startswith("kf") for v in variants):
        subprocess.run([str(KUBEFLOW_SH), "build"], check=True)
        subprocess.run([str(KUBEFLOW_SH), "install"], check=True)
    if "kf-gang" in variants:
        subprocess.run([str(COSCHEDULING_SH), "build"], check=True)
        subprocess.run([str(COSCHEDULING_SH), "install"], check=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    with pod_capacity(cluster, 4 * max(args.jobs)), contextlib.ExitStack() as stack:
        neighbour = (stack.enter_context(airflow_neighbour(cluster, Path(args.kubeconfig), args.neighbour))
                     if args.neighbour else None)  # fmt: skip
        run_all(cluster, args, variants, out, results, neighbour)
    print(f"\nMachine: {machine()}. Raw results: {out}")
    print(report(results))
    return 0


def run_all(cluster: Cluster, args: argparse.Namespace, variants: list[str], out: Path, results: list[dict],
            neighbour: Neighbour | None = None) -> None:  # fmt: skip
    for n in args.jobs:
        for rnd in range(args.rounds):
            order = variants[rnd % len(variants) :] + variants[: rnd % len(variants)]
            if rnd % 2:
                order.reverse()
            for v in order:
                time.sleep(3)  # let the previous namespace's deletion settle
                r = run_once(cluster, v, n, out.parent, args.timeout, args.profile, f"r{rnd + 1}", neighbour)
                r["round"], r["neighbour_tasks"] = rnd + 1, args.neighbour
                results.append(r)
                with out.open("a") as f:
                    f.write(json.dumps(r) + "\n")
                print(f"N={n} round {rnd + 1} {v:9}: pods exist {r['pods_exist_s']:6.2f} s, bound {r['pods_bound_s']:6.2f} s "
                      f"(p50 {r['pod_to_bound_p50_s']:4.2f} s from creation), Running {r['pods_running_s']:6.2f} s, jobs Running "
                      f"{r['jobs_running_s']:6.2f} s, done after pods {r['done_after_pods_s']:5.2f} s, CPU "
                      f"{r['ctrl_cpu_s']:5.2f} s, RSS {r['ctrl_rss_mb']:5.0f} MB, other load {r['other_load_cpu_s']:5.1f} CPU s",
                      flush=True)  # fmt: skip
                if r["scheduler"]:
                    print(f"  kube-scheduler: {scheduler_line(r['scheduler'])}", flush=True)
                print(f"  {where_time_went(r)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
