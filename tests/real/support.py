"""Helpers for jobs whose replicas run on the real node."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import wait_until

Obj = dict[str, Any]
REAL_NODE = "real-node-0"
IMAGE = "localhost/airflow-t9k/train:1"
PROGRAMS = Path(__file__).parent / "programs"
CODE_DIR = "/code"


def ensure_code(core: client.CoreV1Api, namespace: str) -> None:
    data = {p.name: p.read_text() for p in sorted(PROGRAMS.iterdir()) if p.is_file()}
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="code"), data=data)
    try:
        core.create_namespaced_config_map(namespace, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def on_real_node(template: Obj, grace: int = 5) -> Obj:
    """A pod template placed on the real node, with the image and the test programs.

    Containers without an image get the training image; every container mounts /code.
    """
    t = copy.deepcopy(template)
    spec = t.setdefault("spec", {})
    spec.setdefault("nodeSelector", {})["t9k.test/real"] = "true"
    spec.setdefault("tolerations", []).append({"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"})
    spec.setdefault("terminationGracePeriodSeconds", grace)
    spec.setdefault("volumes", []).append({"name": "code", "configMap": {"name": "code"}})
    for c in spec.get("containers") or []:
        c.setdefault("image", IMAGE)
        c.setdefault("imagePullPolicy", "Never")
        c.setdefault("volumeMounts", []).append({"name": "code", "mountPath": CODE_DIR})
        c.setdefault("env", []).append({"name": "OMP_NUM_THREADS", "value": "1"})
    return t


def py(program: str, *args: str) -> list[str]:
    return ["python3", f"{CODE_DIR}/{program}", *args]


class RealPods:
    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self.core = core
        self.ns = namespace

    def log(self, pod: str, container: str | None = None) -> str:
        """The pod's log, read through the API server from the kubelet (its authentication too)."""
        # Unparsed: the client's own decoding hands back the repr of the bytes.
        resp = self.core.read_namespaced_pod_log(pod, self.ns, container=container, _preload_content=False)
        return resp.data.decode()

    def wait_log(self, pod: str, text: str, timeout: float = 120) -> str:
        def has() -> str | None:
            try:
                out = self.log(pod)
            except ApiException:
                return None
            return out if text in out else None

        return wait_until(has, timeout=timeout, what=f"{text!r} in the log of {pod}")

    def finished(self, jobs: Any, kind: str, name: str, pods: list[str], timeout: float = 240) -> Obj:
        """The job once it Succeeded or Failed; on a timeout the failure shows the pods' logs."""
        try:
            return jobs.wait_phase(kind, name, "Succeeded", "Failed", timeout=timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe(*pods)}") from None

    def pod(self, name: str) -> client.V1Pod:
        return self.core.read_namespaced_pod(name, self.ns)

    def terminated(self, name: str) -> client.V1ContainerStateTerminated | None:
        statuses = self.pod(name).status.container_statuses or []
        return statuses[0].state.terminated if statuses and statuses[0].state else None

    def describe(self, *pods: str) -> str:
        """Logs and states, for assertion messages."""
        out = []
        for p in pods:
            try:
                pod = self.pod(p)
                states = [(c.name, _state(c.state)) for c in pod.status.container_statuses or []]
                lines = self.log(p).splitlines()
                tail = "\n".join(lines if len(lines) <= 40 else [*lines[:15], "...", *lines[-25:]])
                out.append(f"--- {p}: {pod.status.phase} {states}\n{tail}")
            except ApiException as exc:
                out.append(f"--- {p}: {exc.status}")
        return "\n".join(out)


def _state(state: client.V1ContainerState) -> str:
    if state.terminated:
        t = state.terminated
        return f"terminated exit {t.exit_code} {t.reason or ''} {t.message or ''}".strip()
    if state.waiting:
        return f"waiting {state.waiting.reason or ''}".strip()
    return "running"
