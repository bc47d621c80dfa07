"""Watching triggers vs polling triggers, against the local control plane (not part of the tests).

    scripts/local-cluster.sh up
    .venv/bin/python benchmarks/triggerer_watch.py [--jobs 1000] [--seconds 30]

Creates N GenericJobs that stay unfinished (no controller runs, so none ever ends) and, in
a fresh process each time, runs N triggers at once in one asyncio loop, as a triggerer
does: first N ``T9kJobTrigger`` (shared watch), then N pollers in the style of Airflow's own
Kubernetes triggers (the provider's ``AsyncKubernetesHook``, a GET of the object every 2 s
through ``get_conn()``). After a warm-up it measures, over a steady window: API requests per
second from the API server's ``apiserver_request_total``, and the process's RSS and CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRIC = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")


def total_requests(kubeconfig: str) -> int:
    from kubernetes import config

    api = config.new_client_from_config(config_file=kubeconfig)
    text = api.call_api("/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False).data.decode()
    return sum(int(float(m.group("value"))) for line in text.splitlines() if (m := METRIC.match(line)))


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def watching(names: list[str], ns: str) -> list[asyncio.Task]:
    from airflow_t9k.triggers.job import T9kJobTrigger

    async def one(name: str) -> None:
        trigger = T9kJobTrigger(kind="GenericJob", name=name, namespace=ns, kubernetes_conn_id="kubernetes_default")
        async for _ in trigger.run():
            return

    return [asyncio.create_task(one(n)) for n in names]


async def polling(names: list[str], ns: str, interval: float) -> list[asyncio.Task]:
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
    from kubernetes_asyncio import client as async_client

    async def one(name: str) -> None:
        hook = AsyncKubernetesHook(conn_id="kubernetes_default")
        while True:
            async with hook.get_conn() as api:  # a fresh ApiClient per poll, as the provider's triggers do
                job = await async_client.CustomObjectsApi(api).get_namespaced_custom_object(
                    "batch.tensorstack.dev", "v1beta1", ns, "genericjobs", name)  # fmt: skip
            if (job.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return
            await asyncio.sleep(interval)

    return [asyncio.create_task(one(n)) for n in names]


async def measure(mode: str, names: list[str], ns: str, kubeconfig: str, warmup: float, window: float) -> dict:
    if mode == "idle":  # no triggers: the control plane's own background traffic
        tasks: list[asyncio.Task] = []
    else:
        tasks = await (watching(names, ns) if mode == "watch" else polling(names, ns, 2.0))
    await asyncio.sleep(warmup)
    loop = asyncio.get_running_loop()
    before_req = await loop.run_in_executor(None, total_requests, kubeconfig)
    before_cpu, start = cpu_seconds(), time.monotonic()
    await asyncio.sleep(window)
    after_req = await loop.run_in_executor(None, total_requests, kubeconfig)
    elapsed = time.monotonic() - start
    result = {
        "mode": mode,
        "alive": sum(not t.done() for t in tasks),
        "requests_per_second": (after_req - before_req - 2) / elapsed,  # minus our two /metrics reads
        "rss_mb": rss_mb(),
        "cpu_percent": 100 * (cpu_seconds() - before_cpu) / elapsed,
    }
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return result


def child(args: argparse.Namespace) -> None:
    names = json.loads(Path(args.names_file).read_text())
    result = asyncio.run(measure(args.mode, names, args.namespace, args.kubeconfig, args.warmup, args.seconds))
    print(json.dumps(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30, help="steady-state window")
    parser.add_argument("--warmup", type=float, default=15)
    parser.add_argument("--kubeconfig", default=str(ROOT / ".local-cluster" / "kubeconfig"))
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    parser.add_argument("--names-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        child(args)
        return 0

    from kubernetes import client, config

    from tests.support.jobs import install_crds

    api = config.new_client_from_config(config_file=args.kubeconfig)
    install_crds(api)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns = f"bench-trig-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    names = [f"j{i}" for i in range(args.jobs)]
    body = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob",
            "spec": {"replicaSpecs": [{"type": "worker", "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]}}  # fmt: skip
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: custom.create_namespaced_custom_object(
            "batch.tensorstack.dev", "v1beta1", ns, "genericjobs", {**body, "metadata": {"name": n}}), names))  # fmt: skip
    names_file = ROOT / ".local-cluster" / "bench-trigger-names.json"
    names_file.write_text(json.dumps(names))
    env = {**os.environ, "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": args.kubeconfig}})}  # fmt: skip
    results = []
    try:
        for mode in ("idle", "watch", "poll"):
            out = subprocess.run(
                [sys.executable, __file__, "--mode", mode, "--namespace", ns, "--names-file", str(names_file),
                 "--kubeconfig", args.kubeconfig, "--seconds", str(args.seconds), "--warmup", str(args.warmup)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        core.delete_namespace(ns)
    print(f"{args.jobs} deferred jobs, one process each, {args.seconds:.0f} s steady-state window after {args.warmup:.0f} s warm-up")
    i, w, p = results
    print(f"{'':30}{'idle (no triggers)':>20}{'watch (T9kJobTrigger)':>24}{'poll every 2 s':>18}")
    print(f"{'API requests per second':30}{i['requests_per_second']:>20.1f}{w['requests_per_second']:>24.1f}{p['requests_per_second']:>18.1f}")
    print(f"{'triggers still waiting':30}{'-':>20}{w['alive']:>24}{p['alive']:>18}")
    print(f"{'process RSS (MB)':30}{i['rss_mb']:>20.1f}{w['rss_mb']:>24.1f}{p['rss_mb']:>18.1f}")
    print(f"{'process CPU (% of one core)':30}{i['cpu_percent']:>20.1f}{w['cpu_percent']:>24.1f}{p['cpu_percent']:>18.1f}")
    ratio = p["requests_per_second"] / max(w["requests_per_second"], 1e-9)
    print(f"polling sends {ratio:.0f}x the requests of watching, counting the idle cluster's own traffic in both")
    print("(aim: >= 50x; watching process RSS aim: < 300 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
