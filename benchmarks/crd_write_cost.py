"""What one write of a job costs the API server, by what its CRD asks it to check.

    scripts/local-cluster.sh up
    .venv/bin/python benchmarks/crd_write_cost.py [--jobs 200] [--rounds 3]

No controller runs. For each variant of the PyTorchTrainingJob CRD, N jobs (vs_kubeflow.py's
body) are POSTed, then each job's status is PUT three times (what our controller writes while
a job starts: the decision, Running, the children's record), 16 requests in flight. The API
server's CPU-seconds (/proc) and the wall time of each phase are printed per write. Variants,
each a CRD of its own group so they sit side by side:

- ``as-ships``: the CRD exactly as `airflow-t9k crds` prints it (CEL rules, the pod template's
  schema, the mode table);
- ``no-cel``: the same with every ``x-kubernetes-validations`` removed;
- ``no-cel-open-template``: no CEL, and the replicas' pod templates unchecked
  (``x-kubernetes-preserve-unknown-fields``), the floor a CRD can have.

Alternating order over the rounds; medians. Only the figures: nothing here changes the CRDs
the product installs.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import Cluster, cpu_seconds, install_crds, machine, median, table, wait_for
from vs_kubeflow import apiserver_pid, t9k_job

from airflow_t9k.controller.crds import all_crds

VARIANTS = ("as-ships", "no-cel", "no-cel-open-template")
KIND = "PyTorchTrainingJob"


def _strip(node: Any, key: str) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v, key) for k, v in node.items() if k != key}
    if isinstance(node, list):
        return [_strip(v, key) for v in node]
    return node


def _open_templates(node: Any) -> Any:
    """Every ``template`` property replaced by an unchecked object."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            opened = v
            if k == "properties" and isinstance(v, dict) and "template" in v:
                opened = {**v, "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
            out[k] = _open_templates(opened)
        return out
    if isinstance(node, list):
        return [_open_templates(v) for v in node]
    return node


def variant_crd(variant: str) -> tuple[dict, str]:
    """The CRD of ``variant`` and the apiVersion its jobs use."""
    crd = copy.deepcopy(next(c for c in all_crds() if c["spec"]["names"]["kind"] == KIND))
    if variant != "as-ships":
        crd = _strip(crd, "x-kubernetes-validations")
        group = f"{variant}.bench.airflow-t9k.test"
        crd["spec"]["group"] = group
        crd["metadata"]["name"] = f"{crd['spec']['names']['plural']}.{group}"
    if variant == "no-cel-open-template":
        crd = _open_templates(crd)
    version = crd["spec"]["versions"][0]["name"]
    return crd, f"{crd['spec']['group']}/{version}"


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def install(cluster: Cluster, crd: dict) -> None:
    name = crd["metadata"]["name"]
    cluster.request("DELETE", f"{CRDS}/{name}", ok=(200, 202, 404))
    wait_for(f"{name} gone", lambda: cluster.session.get(f"{cluster.server}{CRDS}/{name}", timeout=10).status_code == 404, 120)
    cluster.request("POST", CRDS, crd)

    def established() -> bool:
        conditions = (cluster.get(f"{CRDS}/{name}").get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for(f"{name} established", established, 60)
    time.sleep(2)  # discovery and the handler catch up


def _phase(api_pid: int, calls: list[tuple[str, str, Any]], cluster: Cluster) -> tuple[float, float]:
    """(wall seconds, API server CPU-seconds) of sending ``calls`` 16 at a time."""
    cpu0, t0 = cpu_seconds(api_pid), time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda c: cluster.request(c[0], c[1], c[2]), calls))  # list(): every answer awaited, errors raised
    return time.monotonic() - t0, cpu_seconds(api_pid) - cpu0


def run_once(cluster: Cluster, variant: str, crd: dict, api_version: str, n: int) -> dict:
    plural = crd["spec"]["names"]["plural"]
    ns = f"cost-{variant[:10]}-{uuid.uuid4().hex[:5]}"
    cluster.create_namespace(ns)
    api_pid = apiserver_pid()
    assert api_pid, "the local cluster's API server pid is unknown (scripts/local-cluster.sh up)"
    base = f"/apis/{api_version}/namespaces/{ns}/{plural}"
    try:
        bodies = []
        for i in range(n):
            body = t9k_job(f"j{i}")
            body["apiVersion"] = api_version
            bodies.append(("POST", base, body))
        create_wall, create_cpu = _phase(api_pid, bodies, cluster)
        jobs = {j["metadata"]["name"]: j for j in cluster.get(base)["items"]}
        status_wall = status_cpu = 0.0
        for step in range(3):
            calls = []
            for name, job in jobs.items():
                job["status"] = _status(step)
                calls.append(("PUT", f"{base}/{name}/status", job))
            wall, cpu = _phase(api_pid, calls, cluster)
            status_wall, status_cpu = status_wall + wall, status_cpu + cpu
            jobs = {j["metadata"]["name"]: j for j in cluster.get(base)["items"]}
    finally:
        cluster.delete_namespace(ns)
    return {"variant": variant, "n": n, "create_ms": 1000 * create_wall / n, "create_cpu_ms": 1000 * create_cpu / n,
            "status_ms": 1000 * status_wall / (3 * n), "status_cpu_ms": 1000 * status_cpu / (3 * n)}  # fmt: skip


def _status(step: int) -> dict:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    phase = ("Created", "Running", "Running")[step]
    conditions = [{"type": "Created", "status": "True", "lastTransitionTime": now, "reason": "Created", "message": "x"}]
    if step:
        conditions.append({"type": "Running", "status": "True", "lastTransitionTime": now, "reason": "Running", "message": "y"})
    return {"phase": phase, "conditions": conditions, "observedGeneration": 1}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kubeconfig", default=None)
    args = p.parse_args()
    cluster = Cluster(args.kubeconfig) if args.kubeconfig else Cluster()
    crds = {v: variant_crd(v) for v in VARIANTS}
    install_crds(cluster)  # as-ships: created or brought up to date, never deleted (other jobs may use it)
    for v, (crd, _) in crds.items():
        if v != "as-ships":
            install(cluster, crd)
    results: list[dict] = []
    try:
        for rnd in range(args.rounds):
            order = list(VARIANTS[rnd % 3 :] + VARIANTS[: rnd % 3])
            for v in order:
                r = run_once(cluster, v, *crds[v], args.jobs)
                results.append(r)
                print(json.dumps({k: round(x, 2) if isinstance(x, float) else x for k, x in r.items()}), flush=True)
    finally:
        for v, (crd, _) in crds.items():
            if v != "as-ships":
                cluster.request("DELETE", f"{CRDS}/{crd['metadata']['name']}", ok=(200, 202, 404))
    cols = ["create_ms", "create_cpu_ms", "status_ms", "status_cpu_ms"]
    rows = [[v, *(f"{median([r[c] for r in results if r['variant'] == v]):.2f}" for c in cols)] for v in VARIANTS]
    print(f"\nMachine: {machine()}. N = {args.jobs} jobs, {args.rounds} rounds, medians; per write: wall ms at 16 in "
          "flight, API server CPU ms")  # fmt: skip
    print(table(["variant", "create (ms)", "create API CPU (ms)", "status PUT (ms)", "status PUT API CPU (ms)"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
