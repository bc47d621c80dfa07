"""Replica failure -> every replica running again, in place against recreated, on the real node.

    scripts/local-cluster.sh up --real-node
    .venv/bin/python benchmarks/inplace_restart.py [--failures 10] [--replicas 4]

For each strategy (``spec.restartStrategy: InPlace``, then ``Recreate``) one GenericJob of R
replicas (``restartPolicy: OnFailure``) runs on the real node, and F times one replica (in turn)
is made to fail: its program watches the pod annotation ``bench.t9k/fail`` through a downward API
file and exits 1 when it changes. The time is from the annotation's patch to the moment a pod
watch here sees every replica's main container running again, the failed one in a new run (a
higher restart count in the same pod in place; a new pod when recreated). Both include the same
trigger path (annotation -> kubelet -> file -> the program's exit, about a second); what differs
is everything after the exit: the controller's decision and then, in place, the kubelet restarting
the pod's containers after the restart gate let them through; recreated, the pod's deletion, its
new pod's creation, scheduling, sandbox and network set-up, and container start.

Prints p50 and max per strategy. The controller runs with ``--in-place-restarts on`` (the kwok
nodes declare no features; these pods go to the real node only).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config, watch

from tests.support.controller import ControllerProcess
from tests.support.jobs import install_crds

IMAGE = "localhost/airflow-t9k/train:1"
TRIGGER = "bench.t9k/fail"
# Exits 1 once the trigger annotation differs from what it was when this run started.
PROGRAM = 'v0=$(cat /podinfo/fail); while [ "$(cat /podinfo/fail)" = "$v0" ]; do sleep 0.05; done; echo failing; exit 1'


def job(name: str, replicas: int, strategy: str) -> dict:
    container = {"name": "main", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", PROGRAM],
                 "resources": {"limits": {"cpu": "50m", "memory": "32Mi"}},
                 "volumeMounts": [{"name": "podinfo", "mountPath": "/podinfo"}]}  # fmt: skip
    info = {"items": [{"path": "fail", "fieldRef": {"fieldPath": f"metadata.annotations['{TRIGGER}']"}}]}
    template = {"spec": {"nodeSelector": {"t9k.test/real": "true"}, "terminationGracePeriodSeconds": 1,
                         "tolerations": [{"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"}],
                         "containers": [container], "volumes": [{"name": "podinfo", "downwardAPI": info}]}}  # fmt: skip
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"restartStrategy": strategy, "replicaSpecs": [
                {"type": "worker", "replicas": replicas, "restartPolicy": {"policy": "OnFailure", "limit": 1000},
                 "template": template}]}}  # fmt: skip


class Pods:
    """The namespace's pods as a watch here last saw them, and when."""

    def __init__(self, core: client.CoreV1Api, ns: str) -> None:
        self.core, self.ns = core, ns
        self.pods: dict[str, client.V1Pod] = {}
        self.changed = threading.Condition()
        self.stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.stop:
            w = watch.Watch()
            for event in w.stream(self.core.list_namespaced_pod, self.ns, timeout_seconds=60):
                pod = event["object"]
                with self.changed:
                    if event["type"] == "DELETED":
                        if (p := self.pods.get(pod.metadata.name)) is not None and p.metadata.uid == pod.metadata.uid:
                            del self.pods[pod.metadata.name]
                    else:
                        self.pods[pod.metadata.name] = pod
                    self.changed.notify_all()
                if self.stop:
                    w.stop()

    def wait(self, check, timeout: float = 120) -> float:
        """When ``check(pods)`` first held (time.monotonic())."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not check(self.pods):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"not within {timeout}s: {self.summary()}")
                self.changed.wait(left)
            return time.monotonic()

    def summary(self) -> str:
        return "; ".join(f"{n} {p.status.phase} {[_state(c) for c in p.status.container_statuses or []]}"
                         for n, p in sorted(self.pods.items()))  # fmt: skip


def _state(c: client.V1ContainerStatus) -> str:
    s = c.state
    return f"{c.name}:{'running' if s.running else 'terminated' if s.terminated else 'waiting'}:{c.restart_count}"


def run_of(pod: client.V1Pod) -> tuple[str, int] | None:
    """(pod uid, main container restarts) while its main container runs and is not being deleted."""
    if pod.metadata.deletion_timestamp or pod.status.phase != "Running":
        return None
    main = next((c for c in pod.status.container_statuses or [] if c.name == "main"), None)
    if main is None or main.state is None or main.state.running is None:
        return None
    return pod.metadata.uid, main.restart_count


def measure(core, custom, pods: Pods, ns: str, strategy: str, replicas: int, failures: int) -> list[float]:
    name = f"ir-{strategy.lower()}"
    custom.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", job(name, replicas, strategy))
    names = [f"{name}-worker-{i}" for i in range(replicas)]

    def all_running(p: dict) -> bool:
        return all(n in p and run_of(p[n]) is not None for n in names)

    pods.wait(all_running, timeout=180)
    out = []
    for i in range(failures):
        victim = names[i % replicas]
        time.sleep(1.0)  # let the last restart settle (the controller's status write, the gate)
        with pods.changed:
            before = run_of(pods.pods[victim])

        def back(p: dict, victim: str = victim, before: tuple | None = before) -> bool:
            return all_running(p) and run_of(p[victim]) != before

        t0 = time.monotonic()
        core.patch_namespaced_pod(victim, ns, {"metadata": {"annotations": {TRIGGER: str(uuid.uuid4())}}})
        t1 = pods.wait(back, timeout=180)
        out.append(t1 - t0)
        print(f"  {strategy} failure {i + 1}: {victim} running again after {t1 - t0:.2f} s", flush=True)
    job_obj = custom.get_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", name)
    history = job_obj["status"].get("restartHistory") or []
    in_place = sum(1 for e in history if e.get("inPlace"))
    print(f"  {strategy}: {len(history)} restarts on record, {in_place} in place; "
          f"status.restartStrategy {job_obj['status'].get('restartStrategy')}", flush=True)  # fmt: skip
    custom.delete_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", name)
    pods.wait(lambda p: not any(n.startswith(name) for n in p), timeout=120)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failures", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--kubeconfig", default=str(ROOT / ".local-cluster" / "kubeconfig"))
    args = parser.parse_args()
    api = config.new_client_from_config(config_file=args.kubeconfig)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    install_crds(api)
    ns = f"bench-ip-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    while not core.list_namespaced_service_account(ns).items:
        time.sleep(0.2)
    log_dir = ROOT / ".local-cluster" / "bench-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    ctrl = ControllerProcess(Path(args.kubeconfig), ns, log_dir, "--in-place-restarts", "on").start()
    pods = Pods(core, ns)
    results = {}
    try:
        for strategy in ("InPlace", "Recreate"):
            results[strategy] = measure(core, custom, pods, ns, strategy, args.replicas, args.failures)
    finally:
        pods.stop = True
        ctrl.stop()
        core.delete_namespace(ns)
    print(f"\nreplica failure -> every replica running again, {args.replicas}-replica GenericJob on the real node, "
          f"{args.failures} failures each")  # fmt: skip
    print("| strategy | p50 s | max s |")
    print("| --- | --- | --- |")
    for strategy, values in results.items():
        print(f"| {strategy} | {statistics.median(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
