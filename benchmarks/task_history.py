"""Time of the T9k Job tab's History with many runs (issue 48, item 1; not part of the tests).

    scripts/local-cluster.sh up
    .venv/bin/python benchmarks/task_history.py [--runs 200] [--metrics 10] [--requests 20]

Writes RUNS DAG runs of one task into a real Airflow metadata database, each with the task
instance and the XCom ``t9k_history`` a training task pushes (METRICS metrics, a regression on
every tenth run), through Airflow's own tables; starts a real ``airflow api-server`` with the
plugin and a SimpleAuthManager admin; then times ``GET .../history`` for the newest run over HTTP,
with the default window (30 runs) and with all of them. Prints the median and p95 and the size
of the answer. (No Kubernetes request is made: the history is Airflow's records only.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.parse
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.airflow import AirflowStack
from tests.support.cluster import LOCAL_KUBECONFIG, wait_until
from tests.support.ui import Api, team_env


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def seed(db: Path, runs: int, metrics: int) -> list[str]:
    """RUNS runs of bench_history.train with their t9k_history records, oldest first."""
    from airflow.models.dagrun import DagRun
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from tests.support.airflow_rows import add_ti, add_xcom

    engine = create_engine(f"sqlite:///{db}")
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ids = []
    with Session(engine) as s:
        for n in range(runs):
            run_id = f"scheduled__{(base + timedelta(days=n)).isoformat()}"
            s.add(DagRun(dag_id="bench_history", run_id=run_id, logical_date=base + timedelta(days=n),
                         run_after=base + timedelta(days=n), run_type="scheduled", state="success"))  # fmt: skip
            s.flush()
            values = {f"metric_{m}": round(0.5 + ((n * 7 + m) % 50) / 100, 4) for m in range(metrics)}
            record = {"phase": "Succeeded", "metrics": values, "restarts": n % 3, "wall_seconds": 3600 + n,
                      "queue_seconds": 60, "accelerator_hours": 8.0, "wasted_hours": 0.5,
                      "regressions": [{"metric": "metric_0", "value": values["metric_0"], "best": 0.99, "best_run": "x",
                                       "behind": 0.1, "threshold": 0.02}] if n % 10 == 9 else [],
                      "best": {k: {"value": 0.99, "run_id": "x"} for k in values},
                      "job": {"kind": "PyTorchTrainingJob", "namespace": "ml", "name": f"train-{n}", "uid": f"u{n}"}}  # fmt: skip
            ti = add_ti(s, "bench_history", run_id, "train", try_number=1)
            add_xcom(s, ti, "bench_history", run_id, "train", -1, json.dumps(record), key="t9k_history")
            ids.append(run_id)
        s.commit()
    return ids


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--metrics", type=int, default=10)
    ap.add_argument("--requests", type=int, default=20)
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="airflow-history-bench-"))
    dags = home / "dags"
    dags.mkdir()
    (dags / "bench.py").write_text(
        "from datetime import datetime\nfrom airflow.sdk import DAG\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "with DAG('bench_history', start_date=datetime(2026, 1, 1), schedule=None):\n"
        "    EmptyOperator(task_id='train')\n"
    )
    env = team_env(home, {}, {"admin": "admin"})
    env.pop("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST")
    env["AIRFLOW__CORE__MULTI_TEAM"] = "False"
    stack = AirflowStack(home, LOCAL_KUBECONFIG, "default", dags=dags, env=env)
    try:
        stack.cli("db", "migrate")
        stack.cli("dags", "reserialize")
        t0 = time.monotonic()
        runs = seed(home / "airflow.db", args.runs, args.metrics)
        print(f"wrote {args.runs} runs of {args.metrics} metrics in {time.monotonic() - t0:.1f}s")
        stack.launch("api-server")
        wait_until(lambda: stack.health().get("metadatabase", {}).get("status") == "healthy", timeout=120, interval=1,
                   what="api-server up")  # fmt: skip
        api = Api(f"http://127.0.0.1:{stack.port}")
        api.token("admin")
        path = f"/t9k/api/dags/bench_history/runs/{urllib.parse.quote(runs[-1], safe='')}/tasks/train/job/history"

        def once(limit: int) -> tuple[float, int]:
            start = time.perf_counter()
            status, body = api.call("GET", f"{path}?limit={limit}", "admin")
            elapsed = time.perf_counter() - start
            assert status == 200, body
            assert len(body["runs"]) == min(limit, args.runs), len(body["runs"])
            assert len(body["runs"][0]["metrics"]) == args.metrics
            return elapsed, len(json.dumps(body))

        for limit in (30, args.runs):
            once(limit)  # the first call: the api-server's imports and connections
            timed = [once(limit) for _ in range(args.requests)]
            values = [t for t, _ in timed]
            print(f"GET .../history?limit={limit} ({min(limit, args.runs)} runs of {args.metrics} metrics): "
                  f"median {statistics.median(values) * 1000:.0f} ms, p95 {pct(values, 0.95) * 1000:.0f} ms, "
                  f"{timed[0][1] / 1024:.0f} KiB ({args.requests} requests)")  # fmt: skip
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
