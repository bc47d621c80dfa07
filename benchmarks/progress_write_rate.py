"""Status writes per second while many jobs report progress (not part of the tests).

    scripts/local-cluster.sh up
    .venv/bin/python benchmarks/progress_write_rate.py [--jobs 100] [--seconds 60] [--interval 10] [--rate 5]

Starts the controller with ``--progress-interval INTERVAL``, submits JOBS one-replica
GenericJobs that run until deleted, waits until every job is Running and its replica's log is
followed, then for SECONDS "prints" RATE T9K_PROGRESS lines a second into kwok's pod-log file
(kwok serves that file as every pod's log, so each job's replica reports RATE times a second).
Prints the job status writes a second the API server saw (writes of one job are at least
INTERVAL apart: at most 1 + SECONDS // INTERVAL per job, JOBS / INTERVAL a second in the long
run), the progress lines the controller parsed, its CPU and memory. Docs: docs/progress.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from controller_throughput import peak_rss_mb, request_counts, wait_for
from kubernetes import client, config

from tests.support.controller import ControllerProcess
from tests.support.jobs import install_crds

GROUP, VERSION, PLURAL = "batch.tensorstack.dev", "v1beta1", "genericjobs"


def job_body(name: str) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1,
                                       "template": {"spec": {"containers": [{"name": "main",
                                                                             "image": "busybox"}]}}}]}}  # fmt: skip


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60, help="how long the replicas report")
    parser.add_argument("--interval", type=float, default=10, help="the controller's --progress-interval")
    parser.add_argument("--rate", type=float, default=5, help="T9K_PROGRESS lines a second, per replica")
    parser.add_argument("--kubeconfig", default=str(ROOT / ".local-cluster" / "kubeconfig"))
    args = parser.parse_args()
    pod_log = Path(args.kubeconfig).parent / "pod-logs" / "all.log"
    if not pod_log.exists():
        raise SystemExit(f"{pod_log} is missing: this needs the local cluster's kwok (scripts/local-cluster.sh up)")

    api = config.new_client_from_config(config_file=args.kubeconfig)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    install_crds(api)
    ns = f"bench-progress-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_for("default serviceaccount", lambda: bool(core.list_namespaced_service_account(ns).items), 30)
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    ctrl = ControllerProcess(Path(args.kubeconfig), ns, log_dir, "--progress-interval", str(args.interval),
                             "--progress-streams", str(max(args.jobs, 200))).start()  # fmt: skip

    def phases() -> list[str]:
        return [
            (i.get("status") or {}).get("phase")
            for i in custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
        ]

    def with_progress() -> int:
        items = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
        return sum(1 for i in items if (i.get("status") or {}).get("progress"))

    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, job_body(f"p{i}")),
                          range(args.jobs)))  # fmt: skip
        wait_for("every job Running", lambda: phases().count("Running") == args.jobs, 300)
        wait_for("every replica's log followed", lambda: ctrl.metrics().get("progress_stream_open", 0) >= args.jobs, 120)
        time.sleep(2)
        before, cpu0, lines0 = request_counts(api), cpu_seconds(ctrl.pid), ctrl.metrics().get("progress_line", 0)
        start = time.monotonic()
        step = 0
        with open(pod_log, "a") as f:
            while time.monotonic() - start < args.seconds:
                step += 1
                stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                line = json.dumps(
                    {"step": step, "total_steps": 1_000_000, "loss": round(1 / step, 6), "metrics": {"acc": step / 1e6}}
                )
                f.write(f"{stamp} stdout F T9K_PROGRESS {line}\n")
                f.flush()
                time.sleep(max(0.0, start + step / args.rate - time.monotonic()))
        elapsed = time.monotonic() - start
        time.sleep(1)
        after, cpu1, lines1 = request_counts(api), cpu_seconds(ctrl.pid), ctrl.metrics().get("progress_line", 0)
        reported = with_progress()
        rss = peak_rss_mb(ctrl.pid)
    finally:
        ctrl.stop()
        core.delete_namespace(ns)

    writes = after.get(("genericjobs/status", "PUT"), 0) - before.get(("genericjobs/status", "PUT"), 0)
    # Writes at least --progress-interval apart: over ELAPSED seconds at most 1 + ELAPSED // INTERVAL per job.
    bound = args.jobs * (1 + int(elapsed // args.interval))
    print(f"jobs reporting:                      {args.jobs} ({reported} with status.progress)")
    print(f"reports:                             {args.rate:g} lines/s per replica for {elapsed:.1f} s "
          f"({(lines1 - lines0) / elapsed:.0f} lines/s parsed by the controller)")  # fmt: skip
    print(f"job status writes (API server):      {writes} in {elapsed:.1f} s = {writes / elapsed:.2f} /s "
          f"(bound: {bound} = {bound / elapsed:.2f} /s; in the long run jobs / --progress-interval = "
          f"{args.jobs / args.interval:.2f} /s)")  # fmt: skip
    print(f"per job:                             {writes / args.jobs:.1f} writes in {elapsed:.0f} s; "
          f"{args.rate * elapsed:.0f} reports each")  # fmt: skip
    print(f"controller CPU:                      {(cpu1 - cpu0) / elapsed * 100:.1f}% of one core; peak RSS {rss:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
