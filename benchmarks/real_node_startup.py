"""How fast replicas start on the real node (scripts/local-cluster.sh up --real-node).

Prints, for pods of the training image (localhost/airflow-t9k/train:1) on real-node-0:
- pod start latency: creation -> container started (the kubelet's startedAt), and creation ->
  Ready as seen by a watch here, for N pods created one after another and for N at once;
- a PyTorchTrainingJob with 2 replicas run by the bundled controller: create -> Running and
  create -> Succeeded for a program that only joins the process group (DDP over gloo).

    .venv/bin/python benchmarks/real_node_startup.py [--pods 6] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from kubernetes import client, config, watch

ROOT = Path(__file__).resolve().parents[1]
KUBECONFIG = ROOT / ".local-cluster" / "kubeconfig"
IMAGE = "localhost/airflow-t9k/train:1"
PLACEMENT = {"nodeSelector": {"t9k.test/real": "true"},
             "tolerations": [{"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"}]}  # fmt: skip
JOIN = "import torch.distributed as d; d.init_process_group('gloo'); print(d.get_rank(), d.get_world_size())"


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {**PLACEMENT, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": IMAGE, "command": ["sleep", "60"],
                                     "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}  # fmt: skip


def started_latencies(
    core: client.CoreV1Api, ns: str, names: list[str], created: dict[str, float], timeout: float = 180
) -> tuple[list[float], list[float]]:
    """(creation -> startedAt by the kubelet's clock, creation -> Ready seen here) per pod."""
    ready_seen: dict[str, float] = {}
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, ns, timeout_seconds=int(timeout)):
        p = event["object"]
        name = p.metadata.name
        if name in names and name not in ready_seen:
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []):
                ready_seen[name] = time.time()
        if len(ready_seen) == len(names):
            w.stop()
    kubelet = []
    for name in names:
        p = core.read_namespaced_pod(name, ns)
        started = p.status.container_statuses[0].state.running.started_at.timestamp()
        kubelet.append(started - p.metadata.creation_timestamp.timestamp())
    return kubelet, [ready_seen[n] - created[n] for n in names]


def summary(values: list[float]) -> str:
    return f"p50 {statistics.median(values):.2f} s, max {max(values):.2f} s (n={len(values)})"


def pods_round(core: client.CoreV1Api, n: int, at_once: bool) -> tuple[list[float], list[float]]:
    ns = f"bench-real-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    try:
        while not core.list_namespaced_service_account(ns).items:
            time.sleep(0.2)
        names = [f"p{i}" for i in range(n)]
        created: dict[str, float] = {}
        kubelet: list[float] = []
        ready: list[float] = []
        if at_once:
            for name in names:
                created[name] = time.time()
                core.create_namespaced_pod(ns, pod(name))
            kubelet, ready = started_latencies(core, ns, names, created)
        else:
            for name in names:
                created[name] = time.time()
                core.create_namespaced_pod(ns, pod(name))
                k, r = started_latencies(core, ns, [name], created)
                kubelet += k
                ready += r
        return kubelet, ready
    finally:
        core.delete_namespace(ns, grace_period_seconds=1)


def job_round(api: client.ApiClient) -> tuple[float, float]:
    from tests.support.jobs import Jobs, install_crds

    core = client.CoreV1Api(api)
    ns = f"bench-real-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    install_crds(api)
    proc = subprocess.Popen([sys.executable, "-m", "airflow_t9k.cli", "controller", "--kubeconfig", str(KUBECONFIG), "-n", ns,
                             "--health-port", "0", "--metrics-port", "0"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        while not core.list_namespaced_service_account(ns).items:
            time.sleep(0.2)
        jobs = Jobs(api, ns)
        container = {"name": "pytorch", "image": IMAGE, "command": ["python3", "-c", JOIN],
                     "resources": {"limits": {"cpu": "400m", "memory": "512Mi"}}}  # fmt: skip
        template = {"spec": {**PLACEMENT, "terminationGracePeriodSeconds": 1, "containers": [container]}}
        t0 = time.time()
        jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": "j"},
                     "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": "Never",
                                                "template": template}]}})  # fmt: skip
        running = succeeded = None
        deadline = t0 + 300
        while time.time() < deadline and succeeded is None:
            phase = jobs.phase("PyTorchTrainingJob", "j")
            if phase in ("Running", "Succeeded") and running is None:
                running = time.time() - t0
            if phase == "Succeeded":
                succeeded = time.time() - t0
            if phase == "Failed":
                raise SystemExit("the benchmark job failed")
            time.sleep(0.05)
        if running is None or succeeded is None:
            raise SystemExit("the benchmark job did not finish in 300 s")
        return running, succeeded
    finally:
        proc.terminate()
        proc.wait(10)
        core.delete_namespace(ns, grace_period_seconds=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    api = config.new_client_from_config(config_file=str(KUBECONFIG))
    core = client.CoreV1Api(api)
    node = core.read_node("real-node-0")
    print(f"real node: {node.status.node_info.container_runtime_version}, kubelet {node.status.node_info.kubelet_version}, "
          f"{node.status.allocatable['cpu']} CPU")  # fmt: skip
    for at_once in (False, True):
        kubelet: list[float] = []
        ready: list[float] = []
        for _ in range(args.rounds):
            k, r = pods_round(core, args.pods, at_once)
            kubelet += k
            ready += r
        how = f"{args.pods} pods at once" if at_once else "one pod at a time"
        print(f"pod start, {how}: created -> container started {summary(kubelet)}; created -> Ready seen {summary(ready)}")
    runs = [job_round(api) for _ in range(args.rounds)]
    print(f"PyTorchTrainingJob, 2 replicas: create -> Running {summary([r for r, _ in runs])}; "
          f"create -> Succeeded {summary([s for _, s in runs])}")  # fmt: skip


if __name__ == "__main__":
    main()
