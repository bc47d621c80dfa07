"""Time of the T9k Jobs page's list endpoint with many jobs (not part of the tests).

    scripts/local-cluster.sh up
    .venv/bin/python benchmarks/ui_list.py [--jobs 500] [--requests 20]

Creates N small GenericJobs in a new namespace, labelled and annotated as the operator does
(ten DAGs), each with a status like the controller writes (no controller runs, so nothing
changes under the measurement); starts a real ``airflow api-server`` with the plugin and a
SimpleAuthManager admin; then times ``GET /t9k/api/jobs`` as that user over HTTP: "cold" after
the shared list has expired (the api-server LISTs every kind by label selector), and "warm"
(the list served from the shared result). Prints the median and p95 of each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config

from airflow_t9k.ui.reader import CACHE_SECONDS
from tests.support.airflow import AirflowStack
from tests.support.cluster import LOCAL_KUBECONFIG, wait_until
from tests.support.jobs import install_crds
from tests.support.ui import Api, team_env

DAGS = 10
A = "airflow-t9k.io"


def job_body(i: int) -> tuple[dict, dict]:
    dag, run, task = f"bench_{i % DAGS}", f"manual__2026-01-01T00:00:{i // DAGS:02d}", "train"
    meta = {
        "name": f"bench-{i:04d}",
        "labels": {f"{A}/dag-id": dag, f"{A}/run-id": run.replace(":", "_"), f"{A}/task-id": task,
                   f"{A}/map-index": "none", f"{A}/try-number": "1"},
        "annotations": {f"{A}/dag-id": dag, f"{A}/run-id": run, f"{A}/task-id": task, f"{A}/map-index": "-1"},
    }  # fmt: skip
    body = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": meta,
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2,
                                       "template": {"spec": {"containers": [{"name": "main",
                                                                             "image": "busybox"}]}}}]}}  # fmt: skip
    now = "2026-01-01T00:00:00Z"
    status = {"phase": "Running", "startTime": now, "aggregate": {"running": 2, "succeeded": 0, "failed": 0},
              "tasks": [{"type": "worker", "restartCount": 0, "status": [{"name": f"bench-{i:04d}-worker-{r}", "phase": "Running",
                                                                           "restartCount": 0} for r in range(2)]}],
              "conditions": [{"type": t, "status": s, "reason": t, "message": f"{t}.", "lastTransitionTime": now}
                             for t, s in (("Initialized", "True"), ("Running", "True"), ("Completed", "False"))]}  # fmt: skip
    return body, status


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--requests", type=int, default=20)
    args = ap.parse_args()

    api_client = config.new_client_from_config(str(LOCAL_KUBECONFIG))
    install_crds(api_client)
    core = client.CoreV1Api(api_client)
    objects = client.CustomObjectsApi(api_client)
    ns = f"t9k-bench-ui-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    home = Path(tempfile.mkdtemp(prefix="airflow-ui-bench-"))
    dags = home / "dags"
    dags.mkdir()
    (dags / "bench.py").write_text(
        "from datetime import datetime\nfrom airflow.sdk import DAG\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        f"for i in range({DAGS}):\n"
        "    with DAG(f'bench_{i}', start_date=datetime(2026, 1, 1), schedule=None):\n"
        "        EmptyOperator(task_id='train')\n"
    )
    env = team_env(home, {}, {"admin": "admin"})
    env.pop("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST")
    env["AIRFLOW__CORE__MULTI_TEAM"] = "False"
    stack = AirflowStack(home, LOCAL_KUBECONFIG, ns, dags=dags, env=env)
    try:
        t0 = time.monotonic()

        def create(i: int) -> None:
            body, status = job_body(i)
            made = objects.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", body)
            made["status"] = status
            objects.replace_namespaced_custom_object_status("batch.tensorstack.dev", "v1beta1", ns, "genericjobs",
                                                            made["metadata"]["name"], made)  # fmt: skip

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(args.jobs)))
        print(f"created {args.jobs} jobs in {ns} in {time.monotonic() - t0:.1f}s")

        stack.cli("db", "migrate")
        stack.cli("dags", "reserialize")
        stack.launch("api-server")
        wait_until(lambda: stack.health().get("metadatabase", {}).get("status") == "healthy", timeout=120, interval=1,
                   what="api-server up")  # fmt: skip
        api = Api(f"http://127.0.0.1:{stack.port}")
        api.token("admin")

        def once() -> float:
            start = time.perf_counter()
            status, body = api.call("GET", "/t9k/api/jobs", "admin")
            elapsed = time.perf_counter() - start
            assert status == 200, body
            mine = [r for r in body["jobs"] if r["namespace"] == ns]
            assert len(mine) == args.jobs, (len(mine), args.jobs)
            return elapsed

        once()  # first call: the api-server's connection to Kubernetes
        cold, warm = [], []
        for _ in range(args.requests):
            time.sleep(CACHE_SECONDS + 0.2)
            cold.append(once())
            warm.append(once())
        for name, values in (("cold (LIST per kind)", cold), ("warm (shared list)", warm)):
            print(f"GET /t9k/api/jobs, {args.jobs} jobs, {name}: median {statistics.median(values) * 1000:.0f} ms, "
                  f"p95 {pct(values, 0.95) * 1000:.0f} ms ({len(values)} requests)")  # fmt: skip
    finally:
        stack.stop()
        core.delete_namespace(ns)


if __name__ == "__main__":
    main()
