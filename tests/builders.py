"""Builders for jobs and observed pods, so test tables stay short."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_t9k.controller.reconcile import Observed, Plan, plan

Obj = dict[str, Any]
NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)


def generic(name: str = "job", *types: tuple[str, int], **spec: Any) -> Obj:
    types = types or (("worker", 2),)
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
        "spec": {
            "replicaSpecs": [
                {
                    "type": t,
                    "replicas": n,
                    "template": {"spec": {"containers": [{"name": "main", "image": "img", "command": ["train"]}]}},
                }
                for t, n in types
            ],
            **spec,
        },
    }
    return job


def restart(job: Obj, policy: str, limit: int | None = None, rtype: str | None = None) -> Obj:
    job = copy.deepcopy(job)
    for rs in job["spec"]["replicaSpecs"]:
        if rtype is None or rs["type"] == rtype:
            rs["restartPolicy"] = {"policy": policy} | ({} if limit is None else {"limit": limit})
    return job


def colossal(name: str = "cai", workers: int = 2, **extra: Any) -> Obj:
    spec = {
        "ssh": {"authMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
        "launcher": {
            "image": "hpcaitech/colossalai:0.3.0",
            "workingDir": "/workspace",
            "env": [],
            "resources": {"limits": {"cpu": 1}},
        },
        "worker": {
            "replicas": workers,
            "procPerWorker": 2,
            "command": ["train.py", "arg1"],
            "torchArgs": [],
            "template": {
                "spec": {"containers": [{"name": "worker", "image": "hpcaitech/colossalai:0.3.0", "command": ["ignored"]}]}
            },
        },
    }
    spec.update(extra)
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "ColossalAIJob",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
        "spec": spec,
    }


def pod(name: str, phase: str = "Running", exit_code: int | None = None, restarts: int = 0, rtype: str | None = None,
        deleting: bool = False, reason: str | None = None) -> Obj:  # fmt: skip
    state: Obj = {"running": {}}
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code, **({"reason": reason} if reason else {})}}
    meta: Obj = {
        "name": name,
        "uid": f"uid-{name}",
        "annotations": {"batch.tensorstack.dev/restart-count": str(restarts)},
        "labels": {"batch.tensorstack.dev/replica-type": rtype or name.split("-")[-2]},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T12:00:00Z"
    return {"kind": "Pod", "metadata": meta, "status": {"phase": phase, "containerStatuses": [{"name": "main", "state": state}]}}


def service(name: str, rtype: str = "worker") -> Obj:
    return {
        "kind": "Service",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"batch.tensorstack.dev/replica-type": rtype}},
    }


def evidence(job: Obj) -> Obj:
    """The ConfigMap in which the controller kept a finished job's evidence (reconcile/evidence.py)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{job['metadata']['name']}-evidence"}, "data": {}}


def run(job: Obj, *objects: Obj, status: Obj | None = None, evidence_kept: bool = True) -> Plan:
    """Plan once. Clean-up waits for the evidence ConfigMap; with ``evidence_kept`` (the
    default, for tests about what clean-up deletes) it is observed already."""
    job = copy.deepcopy(job)
    if status is not None:
        job["status"] = status
    kept = (evidence(job),) if evidence_kept else ()
    return plan(job, Observed.of(*objects, *kept), NOW)


def cond(p: Plan, type_: str) -> Obj | None:
    return next((c for c in p.status.get("conditions", []) if c["type"] == type_), None)


def settle(job: Obj, *objects: Obj) -> Plan:
    """Plan twice, feeding the first status back, as the controller does after a write."""
    first = run(job, *objects)
    return run(job, *objects, status=first.status)


def pytorch(name: str = "pt", *types: tuple[str, int], policy: str = "ExitCode", **spec: Any) -> Obj:
    types = types or (("master", 1), ("worker", 2))
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1},
        "spec": {
            "replicaSpecs": [
                {"type": t, "replicas": n, "restartPolicy": policy,
                 "template": {"spec": {"containers": [{"name": "pytorch", "image": "img", "command": ["python", "train.py"]}]}}}
                for t, n in types
            ],
            **spec,
        },
    }  # fmt: skip


def training(kind: str, container: str, name: str, *types: tuple[str, int], policy: str = "OnFailure", **spec: Any) -> Obj:
    job = pytorch(name, *types, policy=policy, **spec)
    job["kind"] = kind
    for rs in job["spec"]["replicaSpecs"]:
        rs["template"]["spec"]["containers"][0]["name"] = container
    return job


# A fixed clock for tables of timed cases: ``at(s)`` is s seconds after T0, ``ts(s)`` the same
# as the API server writes it.
T0 = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ts(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")
