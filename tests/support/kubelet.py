"""Set a pod's terminal state the way a kubelet would, through ``pods/status``.

Pods on kwok nodes never run code; integration tests use this to decide exactly how one
replica ends (phase, exit code, reason, restart count), where the annotation-driven kwok
stages are too coarse, or when (``release_pods``: a held pod is given its duration).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from airflow_t9k.kinds.base import LABEL_JOB
from tests.support.cluster import wait_until

# Reasons a kubelet puts on the container (the first two) or on the pod (Evicted).
CONTAINER_REASONS = {"Error", "OOMKilled", "Completed", "ContainerCannotRun", "DeadlineExceeded"}
POD_REASONS = {"Evicted"}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def terminal_status(
    pod: client.V1Pod,
    *,
    phase: str,
    exit_code: int,
    reason: str | None = None,
    restart_count: int = 0,
    message: str | None = None,
) -> dict[str, Any]:
    """The ``status`` a kubelet reports for a pod whose containers all ended."""
    if phase not in ("Succeeded", "Failed"):
        raise ValueError(f"a terminal phase is Succeeded or Failed, not {phase!r}")
    if reason is not None and reason not in CONTAINER_REASONS | POD_REASONS:
        raise ValueError(f"unknown reason {reason!r}")
    now = _now()
    container_reason = reason if reason in CONTAINER_REASONS else ("Completed" if exit_code == 0 else "Error")
    started = now
    for cs in (pod.status.container_statuses or []) if pod.status else []:
        if cs.state and cs.state.running and cs.state.running.started_at:
            started = cs.state.running.started_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    statuses = [
        {
            "name": c.name,
            "image": c.image,
            "ready": False,
            "started": False,
            "restartCount": restart_count,
            "state": {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": container_reason,
                    "message": message or "",
                    "startedAt": started,
                    "finishedAt": now,
                }
            },
        }
        for c in pod.spec.containers
    ]
    ready_reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [
            {"type": "Ready", "status": "False", "reason": ready_reason, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "False", "reason": ready_reason, "lastTransitionTime": now},
        ],
        "containerStatuses": statuses,
    }
    if reason in POD_REASONS:
        status["reason"] = reason
        status["message"] = message or "The node was low on resource: memory."
        # A kubelet since 1.26 marks a pod it evicts under node pressure as a disruption.
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                                     "message": status["message"], "lastTransitionTime": now})  # fmt: skip
    return status


def set_pod_terminated(
    api: client.CoreV1Api,
    namespace: str,
    name: str,
    *,
    phase: str = "Failed",
    exit_code: int = 1,
    reason: str | None = None,
    restart_count: int = 0,
    message: str | None = None,
) -> client.V1Pod:
    """Patch ``pods/status`` so the pod reads back as a kubelet would have left it."""
    pod = api.read_namespaced_pod(name, namespace)
    body = {
        "status": terminal_status(
            pod, phase=phase, exit_code=exit_code, reason=reason, restart_count=restart_count, message=message
        )
    }
    return api.patch_namespaced_pod_status(name, namespace, body)


def set_pod_waiting(api: client.CoreV1Api, namespace: str, name: str, *, reason: str, message: str = "") -> client.V1Pod:
    """Patch ``pods/status`` as a kubelet that cannot start the containers reports it (a
    ``Pending`` pod whose containers wait, e.g. ``ImagePullBackOff``). Use it on a pod no kwok
    node runs (a node selector nothing matches), so no stage overwrites it."""
    pod = api.read_namespaced_pod(name, namespace)
    statuses = [{"name": c.name, "image": c.image, "imageID": "", "ready": False, "started": False, "restartCount": 0,
                 "state": {"waiting": {"reason": reason, "message": message}}} for c in pod.spec.containers]  # fmt: skip
    return api.patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Pending", "containerStatuses": statuses}})


def release_pods(api: client.CoreV1Api, namespace: str, job_names: list[str], *, after: str = "1s") -> None:
    """Let the held pods of these jobs end: a kwok pod without ``sim.t9k.test/duration`` stays
    Running; with one, kwok's stage ends it (failed where ``sim.t9k.test/fail-pods`` matches)
    that long after this update. Waits for one pod per job first (the controller may be a
    moment behind its jobs)."""
    selector = f"{LABEL_JOB} in ({','.join(sorted(job_names))})"

    def every_pod() -> list[client.V1Pod] | None:
        pods = api.list_namespaced_pod(namespace, label_selector=selector).items
        return pods if len(pods) == len(job_names) else None

    for pod in wait_until(every_pod, timeout=30, interval=0.5, what=f"the {len(job_names)} pods of {job_names}"):
        api.patch_namespaced_pod(pod.metadata.name, namespace, {"metadata": {"annotations": {"sim.t9k.test/duration": after}}})


POOL_TAINT = "t9k.test/pool"  # on the nodes a test adds: no other test's pod lands there


def kwok_node(name: str, pool: str, key: str = POOL_TAINT, cpu: str = "8", memory: str = "32Gi") -> client.V1Node:
    """A kwok node of one test's only: tainted (``key=pool``), so no other test's pod lands on it
    (and dies with it), and not labelled type=kwok, so no other test counts it among the cluster's
    own nodes."""
    room = {"cpu": cpu, "memory": memory, "pods": "110"}
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={"kwok.x-k8s.io/node": "fake"},
            labels={"kubernetes.io/hostname": name, "type": "kwok-test-pool", key: pool},
        ),
        spec=client.V1NodeSpec(taints=[client.V1Taint(key=key, value=pool, effect="NoSchedule")]),
        status=client.V1NodeStatus(capacity=room, allocatable=room),
    )


def delete_nodes(api: client.CoreV1Api, names: list[str]) -> None:
    for n in names:
        try:
            api.delete_node(n)
        except ApiException as exc:
            if exc.status != 404:
                raise
