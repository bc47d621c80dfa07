"""Kubeflow's common ``JobStatus``, as AscendJob reports it (seed 002, tables 1 and 2).

The core keeps T9k's status (phase, conditions, per-replica ``tasks``); this module maps it
to conditions ``Created / Running / Restarting / Succeeded / Failed``, ``replicaStatuses``,
``startTime``, ``completionTime`` and ``lastReconcileTime``, and back. ``tasks`` and
``backoffCount`` stay in the status: they carry restart counts across a pod's deletion and
name the failed replicas for the operator's report; so do ``rootCause`` (the replica that failed
first, which the operator's error and ``permanent_exit_codes`` read) and ``restartHistory`` (the
disruptions on record, so a pass repeated after a conflict finds its own decision).
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from airflow_t9k.api.outcome import condition, true_condition

Obj = dict[str, Any]

KEPT = (
    "tasks",
    "backoffCount",
    "startTime",
    "lastResumeTime",
    "restartStrategy",
    "scheduling",
    "observedGeneration",
    "usage",
    "progress",
    "template",
    "created",
    "rootCause",  # the failure that decided the end (reconcile/disruption.py)
    "restartHistory",  # what restarted and why (reconcile/disruption.py), a stall's included
    "stall",  # the last stall, on record across passes (reconcile/stall.py)
    "avoidedNodes",  # the nodes the job's new pods keep off (reconcile/nodes.py)
)


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def to_core(status: Obj | None) -> Obj | None:
    """What the core needs from a Kubeflow-style status: phase, conditions, restart counts."""
    if not status:
        return status
    core: Obj = {k: copy.deepcopy(status[k]) for k in KEPT if k in status}
    core_conditions: list[Obj] = []
    if true_condition(status, "Failed"):
        core["phase"] = "Failed"
    elif true_condition(status, "Succeeded"):
        core["phase"] = "Succeeded"
    elif true_condition(status, "Running") or true_condition(status, "Restarting"):
        core["phase"] = "Running"
    elif condition(status, "Created") is not None:
        core["phase"] = "Pending"
    # Admitted: Kueue's admission (controller/reconcile/queueing.py), the same condition in both shapes.
    pairs = (("Succeeded", "Completed"), ("Failed", "Failed"), ("Running", "Running"), ("Admitted", "Admitted"),
             ("Stalled", "Stalled"))  # fmt: skip
    for public, internal in pairs:
        c = condition(status, public)
        if c is not None:
            core_conditions.append({**{k: c[k] for k in ("status", "reason", "message", "lastTransitionTime") if k in c},
                                    "type": internal})  # fmt: skip
    if core.get("phase") in ("Running", "Succeeded", "Failed"):
        # The core's "initialized" condition (controller/reconcile/progress.py), so it is not set again.
        core_conditions.append({"type": "Initializing", "status": "True", "reason": "-", "message": ""})
    core["conditions"] = core_conditions
    return core


class _Conditions:
    """Kubeflow's setCondition: a condition whose status changes moves to the end of the list."""

    def __init__(self, old: list[Obj], now: datetime) -> None:
        self.items = copy.deepcopy(old)
        self.now = _stamp(now)

    def find(self, type_: str) -> Obj | None:
        return condition({"conditions": self.items}, type_)

    def set(self, type_: str, status: bool, reason: str, message: str, move: bool = True) -> bool:
        """``move=False``: a change stays in place (a Stalled condition turned false must not become
        the job's State column, ``conditions[-1:]``)."""
        value = "True" if status else "False"
        current = self.find(type_)
        if current is not None and current.get("status") == value:
            current.update(reason=reason, message=message)
            return False
        if current is not None and not move:
            current.update(status=value, reason=reason, message=message, lastUpdateTime=self.now, lastTransitionTime=self.now)
            return True
        if current is not None:
            self.items.remove(current)
        self.items.append({"type": type_, "status": value, "reason": reason, "message": message,
                           "lastUpdateTime": self.now, "lastTransitionTime": self.now})  # fmt: skip
        return True

    def clear(self, type_: str, reason: str, message: str) -> None:
        """Set False only if it was ever set."""
        if self.find(type_) is not None:
            self.set(type_, False, reason, message)


def from_core(job: Obj, core: Obj, restarting: bool, now: datetime, selector: dict[str, Obj]) -> Obj:
    """The Kubeflow-style status for what the core decided.

    ``restarting``: the pass deleted a replica to restart it. ``selector``: replica type ->
    its ``labelSelector``. ``lastReconcileTime`` moves only when something else changed, so
    writing the status never triggers another pass by itself.
    """
    old: Obj = job.get("status") or {}
    kind, name = job["kind"], job["metadata"]["name"]
    conds = _Conditions(old.get("conditions") or [], now)
    conds.set("Created", True, f"{kind}Created", f"{kind} {name} is created.")
    phase = core.get("phase")
    tasks = core.get("tasks") or []
    replicas = [r for t in tasks for r in t.get("status") or []]
    all_running = bool(replicas) and all(r.get("phase") == "Running" for r in replicas)
    if phase in ("Succeeded", "Failed"):
        decisive = condition(core, "Completed" if phase == "Succeeded" else "Failed") or {}
        conds.set("Running", False, f"{kind}{phase}", f"{kind} {name} has {phase.lower()}.")
        conds.clear("Restarting", f"{kind}{phase}", f"{kind} {name} has {phase.lower()}.")
        conds.set(phase, True, str(decisive.get("reason") or f"{kind}{phase}"), str(decisive.get("message") or ""))
    elif restarting or (true_condition(old, "Restarting") and not all_running):
        message = f"{kind} {name} is restarting: a replica failed and its restart policy allows a restart."
        conds.set("Running", False, f"{kind}Restarting", message)
        conds.set("Restarting", True, f"{kind}Restarting", message)
    elif phase == "Running":
        conds.clear("Restarting", f"{kind}Running", f"{kind} {name} is running.")
        conds.set("Running", True, f"{kind}Running", f"{kind} {name} is running.")
    elif phase == "Pending" and condition(core, "Admitted") is not None:  # waiting in a Kueue queue, or evicted
        conds.clear("Running", f"{kind}Queued", f"{kind} {name} waits for admission by Kueue.")
    stalled = condition(core, "Stalled")  # hang detection (reconcile/stall.py)
    if stalled is not None and (stalled.get("status") == "True" or conds.find("Stalled") is not None):
        stalled_true = stalled.get("status") == "True"
        conds.set("Stalled", stalled_true, str(stalled.get("reason") or ""), str(stalled.get("message") or ""),
                  move=stalled_true)  # fmt: skip
    admitted = condition(core, "Admitted")
    if admitted is not None:
        conds.set(
            "Admitted", admitted.get("status") == "True", str(admitted.get("reason") or ""), str(admitted.get("message") or "")
        )

    out: Obj = {"conditions": conds.items, "replicaStatuses": _replica_statuses(tasks, selector)}
    out.update({k: copy.deepcopy(core[k]) for k in KEPT if k in core})
    if phase in ("Succeeded", "Failed"):
        out["completionTime"] = old.get("completionTime") or _stamp(now)
    previous = {k: v for k, v in old.items() if k != "lastReconcileTime"}
    out["lastReconcileTime"] = old["lastReconcileTime"] if previous == out and "lastReconcileTime" in old else _stamp(now)
    return out


def _replica_statuses(tasks: list[Obj], selector: dict[str, Obj]) -> Obj:
    out: Obj = {}
    for task in tasks:
        phases = [r.get("phase") for r in task.get("status") or []]
        out[task["type"]] = {
            "active": phases.count("Running"),
            "succeeded": phases.count("Succeeded"),
            "failed": phases.count("Failed"),
            "labelSelector": copy.deepcopy(selector.get(task["type"], {})),
        }
    return out
