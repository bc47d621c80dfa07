"""Controller throughput against the local control plane (not part of the tests).

    scripts/local-cluster.sh up
    .venv/bin/python benchmarks/controller_throughput.py [--jobs 200] [--replicas 4]

Submits N GenericJobs of R replicas at once (each with one Service per replica), then
prints: the time until every pod exists and until every job is Running (from the last
submission); after every pod is set Succeeded the way a kubelet would, the time until every
job is Succeeded; write requests per job by resource and verb from the API server's
``apiserver_request_total``; and the controller's peak RSS.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config

from tests.support.controller import ControllerProcess
from tests.support.jobs import install_crds
from tests.support.kubelet import terminal_status

METRIC = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE"}


def request_counts(api: client.ApiClient) -> Counter[tuple[str, str]]:
    text = api.call_api("/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False).data.decode()
    out: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        labels = dict(kv.split("=", 1) for kv in re.findall(r'\w+="[^"]*"', m.group("labels")))
        labels = {k: v.strip('"') for k, v in labels.items()}
        if labels.get("verb") not in WRITE_VERBS:
            continue
        resource = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
        out[(resource, labels["verb"])] += int(float(m.group("value")))
    return out


def job_body(name: str, replicas: int) -> dict:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name},
        "spec": {
            "service": {"ports": [{"name": "p", "port": 80}]},
            "replicaSpecs": [{"type": "worker", "replicas": replicas,
                              "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}],
        },
    }  # fmt: skip


def wait_for(what: str, check, timeout: float) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.25)
    return time.monotonic()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--kubeconfig", default=str(ROOT / ".local-cluster" / "kubeconfig"))
    parser.add_argument("--workers", type=int, default=4, help="controller workers")
    args = parser.parse_args()

    api = config.new_client_from_config(config_file=args.kubeconfig)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    install_crds(api)
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_for("default serviceaccount", lambda: bool(core.list_namespaced_service_account(ns).items), 30)
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    ctrl = ControllerProcess(Path(args.kubeconfig), ns, log_dir, "--workers", str(args.workers)).start()
    total_pods = args.jobs * args.replicas
    group, version, plural = "batch.tensorstack.dev", "v1beta1", "genericjobs"

    def phases() -> Counter[str]:
        items = custom.list_namespaced_custom_object(group, version, ns, plural)["items"]
        return Counter((i.get("status") or {}).get("phase") for i in items)

    try:
        before = request_counts(api)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: custom.create_namespaced_custom_object(group, version, ns, plural,
                                                                           job_body(f"j{i}", args.replicas)),
                          range(args.jobs)))  # fmt: skip
        submitted = time.monotonic()
        pods_at = wait_for("every pod", lambda: len(core.list_namespaced_pod(ns).items) >= total_pods, 300)
        running_at = wait_for("every job Running", lambda: phases()["Running"] == args.jobs, 300)

        pods = core.list_namespaced_pod(ns).items
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda p: core.patch_namespaced_pod_status(
                p.metadata.name, ns, {"status": terminal_status(p, phase="Succeeded", exit_code=0)}), pods))  # fmt: skip
        all_pods_done = time.monotonic()
        succeeded_at = wait_for("every job Succeeded", lambda: phases()["Succeeded"] == args.jobs, 300)
        time.sleep(2)  # let trailing writes (events, last status) land before counting
        after = request_counts(api)
        rss = peak_rss_mb(ctrl.proc.pid)
        metrics = ctrl.metrics()
    finally:
        ctrl.stop()
        core.delete_namespace(ns)

    print(f"jobs x replicas:                         {args.jobs} x {args.replicas} ({total_pods} pods, {total_pods} services)")
    print(f"every pod exists after last submission:  {pods_at - submitted:6.2f} s")
    print(f"every job Running after last submission: {running_at - submitted:6.2f} s   (aim: < 30 s)")
    print(f"every job Succeeded after pods finished: {succeeded_at - all_pods_done:6.2f} s")
    print("write requests per job (API server, all clients), by resource and verb:")
    diff = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) > 0}
    for (resource, verb), n in sorted(diff.items()):
        if n / args.jobs < 0.5:  # other tenants of the cluster (e.g. namespace deletions)
            continue
        print(f"  {verb:6} {resource:24} {n / args.jobs:7.2f}")
    print("  (pods/status PATCH and pods/binding are kwok, the scheduler and this driver; pods POST, services POST")
    print("   and genericjobs/status PUT come only from the controller)")
    status_writes = diff.get(("genericjobs/status", "PUT"), 0) / args.jobs
    print(f"status writes per job: {status_writes:.2f} for 3 phase changes (Pending, Running, Succeeded) "
          f"= {status_writes / 3:.2f} per phase change   (aim: <= 2)")  # fmt: skip
    creates = diff.get(("pods", "POST"), 0) + diff.get(("services", "POST"), 0)
    print(f"pod+service creates: {creates} for {2 * total_pods} children needed   (aim: equal)")
    print(f"controller: {int(metrics.get('reconcile', 0))} reconciles, {int(metrics.get('conflict', 0))} conflicts, "
          f"{int(metrics.get('create_exists.Pod', 0))} AlreadyExists")  # fmt: skip
    print(f"controller peak RSS: {rss:.1f} MB   (aim: < 200 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
