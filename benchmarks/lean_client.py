"""The controller's client: memory after import and after building it, and JSON decode speed.

    .venv/bin/python benchmarks/lean_client.py [--kubeconfig K] [--rounds 5] [--decodes 2000]

RSS is ``VmRSS`` of a fresh interpreter (median over rounds): after ``import
airflow_t9k.controller.cli``, then after building the client the way the controller does (and
one GET, so the TLS context and the connection exist), on the loop the controller runs on
(uvloop since the lean client); and of the controller itself, ready and idle. Decoding is timed on a real pod's JSON:
one pod is created in a namespace of its own, kwok runs it, its JSON is read as the API server
serves it (managedFields included), and the namespace is deleted.
Works against older revisions too (``T9K_BENCH_SOURCE=DIR``, as scaling.py), for before/after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit
import uuid
from pathlib import Path

from _bench import DEFAULT_KUBECONFIG, ROOT, Cluster, Ours, machine, table, wait_for

PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    out = {"python": rss()}
    import airflow_t9k.controller.cli as cli
    out["import"] = rss()
    async def build():
        from airflow_t9k.k8s import client
        if hasattr(client, "connect"):
            kube = await client.connect(sys.argv[1])
        else:  # revisions before the lean client
            kube = client.Kube(await client.load_api_client(sys.argv[1]))
        await kube.get("/version")
        return kube
    async def main():
        kube = await build()
        out["client"] = rss()
        await kube.close()
    run = cli.loop_runner("auto") if hasattr(cli, "loop_runner") else asyncio.run  # the controller's loop
    run(main())
    out["modules"] = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in ("kubernetes", "kubernetes_asyncio")})
    print(json.dumps(out))
    """
)


def probe(kubeconfig: str, source: str) -> dict:
    env = {**os.environ, "PYTHONPATH": source}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, kubeconfig], env=env, cwd=source, capture_output=True, text=True, check=True
    )  # cwd: `-c` puts it first on sys.path
    return json.loads(out.stdout)


def real_pod_json(cluster: Cluster) -> str:
    ns = f"lean-bench-{uuid.uuid4().hex[:6]}"
    cluster.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    try:
        pod = {
            "metadata": {"name": "worker-0", "labels": {"app": "bench", "replica-type": "worker", "replica-index": "0"}},
            "spec": {
                "restartPolicy": "OnFailure",
                "containers": [{
                    "name": "pytorch", "image": "busybox", "command": ["sh", "-c", "sleep 20"],
                    "env": [{"name": "MASTER_ADDR", "value": "master-0"}, {"name": "WORLD_SIZE", "value": "4"},
                            {"name": "RANK", "value": "1"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }],
            },
        }  # fmt: skip
        cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", pod)
        path = f"/api/v1/namespaces/{ns}/pods/worker-0"
        wait_for("the pod to run", lambda: cluster.get(path).get("status", {}).get("phase") == "Running", 120)
        r = cluster.session.get(cluster.server + path, timeout=30)
        r.raise_for_status()
        return r.text
    finally:
        cluster.request("DELETE", f"/api/v1/namespaces/{ns}", ok=(200, 202, 404))


def idle_controller_rss(cluster: Cluster) -> float:
    """VmRSS of `airflow-t9k controller` (one kind, one empty namespace) once ready, plus 2 s."""
    ns = f"lean-bench-{uuid.uuid4().hex[:6]}"
    cluster.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    ours = Ours(cluster, ns, Path(tempfile.mkdtemp(prefix="lean-bench-")))
    try:
        pid = ours.start()
        time.sleep(2)
        status = Path(f"/proc/{pid}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0]) / 1024
    finally:
        ours.stop()
        cluster.request("DELETE", f"/api/v1/namespaces/{ns}", ok=(200, 202, 404))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", default=str(DEFAULT_KUBECONFIG))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--decodes", type=int, default=2000)
    args = ap.parse_args()
    source = os.environ.get("T9K_BENCH_SOURCE") or str(ROOT)
    print(machine())
    probes = [probe(args.kubeconfig, source) for _ in range(args.rounds)]
    rows = [[what, round(statistics.median(p[what] for p in probes), 1)] for what in ("python", "import", "client")]
    print(table(["VmRSS after", "MB (median)"], rows))
    print(f"client libraries imported: {probes[0]['modules'] or 'none'}")
    cluster = Cluster(args.kubeconfig)
    idle = [idle_controller_rss(cluster) for _ in range(min(args.rounds, 3))]
    print(
        f"controller ready and idle (one kind, one empty namespace): VmRSS {statistics.median(idle):.1f} MB (median of "
        f"{len(idle)})"
    )

    sys.path.insert(0, source)
    from airflow_t9k.k8s.client import decode

    raw = real_pod_json(cluster)
    assert decode(raw) == json.loads(raw)
    results = []
    for name, fn in (("json.loads", json.loads), ("client.decode", decode)):
        best = min(timeit.repeat(lambda fn=fn: fn(raw), number=args.decodes, repeat=5)) / args.decodes
        results.append([name, round(best * 1e6, 1)])
    print(f"\npod JSON: {len(raw)} bytes; best of 5 x {args.decodes} decodes")
    print(table(["decoder", "us per pod"], results))


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"\n({time.monotonic() - t0:.0f} s)")
