"""What a job used: accelerator-seconds per resource name, cpu-seconds, wall time, and waste.

A pod's *run* lasts from its first container's ``startedAt`` to its last container's
``finishedAt`` (or the moment the controller saw it go, while it still ran). It uses what its
containers' limits ask for (init containers excluded): every extended resource
(``nvidia.com/gpu``, ``huawei.com/Ascend910``, any ``vendor/name`` that is not cpu, memory,
storage or hugepages) times the run's seconds, and cpu (limit, else request) times them.
Devices asked for through DRA (a claim made from a ResourceClaimTemplate, reconcile/dra.py)
count the same way, under their DeviceClass's name (``gpu.nvidia.com``): a DeviceClass name
has no ``/``, so it never is an extended resource's.

``status.usage`` is a ledger that survives the pods' deletion and counts each run once:

- ``open``: uid -> {pod, start, accelerators, cpu} of every run that has started and is not
  counted yet: at most one per replica (a replica's old pod is deleted before its new one is
  made). It is written with the status change the pod's start makes anyway (its replica's
  container goes Waiting -> Running), so it adds no write.
- a run is *closed* (its seconds added to the totals, its uid moved from ``open`` to ``closed``)
  in the pass that deletes its pod, sees it being deleted by someone else, finds it gone from
  the cache, or ends the job. The executor writes status before it deletes anything, so the
  count is durable before the pod goes; a pass repeated after a conflict starts from the old
  status and decides the same again; a later pass finds the uid in ``closed`` and adds nothing.
- ``closed`` keeps only uids of pods still in the cache (a pod gone never comes back): bounded
  by the job's pods, like ``open``. No list of every run is kept.
- a run closed while the job goes on (a restart, a disruption, a group restart, a pause, a
  replica scaled away) is *wasted*: its accelerator-seconds go to ``wasted`` too. Runs that
  the job's end closes are not.

Totals only move when a run closes, so a pass where only ``now`` moved writes nothing new.
While a job runs its totals cover its ended runs; ``open`` says what runs now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from airflow_t9k.controller.reconcile.actions import Delete, Plan
from airflow_t9k.controller.reconcile.dra import pod_devices
from airflow_t9k.controller.reconcile.observe import Observed, is_deleting
from airflow_t9k.controller.reconcile.status import FINISHED, timestamp

Obj = dict[str, Any]

USAGE = "usage"
NOT_ACCELERATORS = frozenset({"cpu", "memory", "ephemeral-storage", "storage", "pods"})
_SUFFIX = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10**3), "M": Decimal(10**6),
           "G": Decimal(10**9), "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30)}  # fmt: skip


def _number(value: object) -> float:
    """A Kubernetes quantity as a number; 0 for what is not one (a hostile pod must not stop a pass)."""
    text = str(value).strip()
    scale = Decimal(1)
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)]:
            text, scale = text[: -len(suffix)], _SUFFIX[suffix]
            break
    try:
        return float(Decimal(text) * scale)
    except (InvalidOperation, ValueError):
        return 0.0


def is_accelerator(resource: str) -> bool:
    return resource not in NOT_ACCELERATORS and not resource.startswith("hugepages-")


def requested(pod: Obj, claim_templates: Mapping[str, Obj] | None = None) -> tuple[dict[str, float], float]:
    """(accelerators per resource name, cpus) the pod's containers' limits ask for, and the DRA
    devices its claims from ``claim_templates`` (its namespace's, by name) ask for, per DeviceClass."""
    accelerators: dict[str, float] = {}
    cpu = 0.0
    for c in (pod.get("spec") or {}).get("containers") or []:
        resources = c.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        for name, value in limits.items():
            if is_accelerator(str(name)) and (n := _number(value)) > 0:
                accelerators[str(name)] = accelerators.get(str(name), 0.0) + n
        cpu += _number(limits.get("cpu", requests.get("cpu", 0)))
    for device_class, n in pod_devices(pod, claim_templates or {}).items():
        accelerators[device_class] = accelerators.get(device_class, 0.0) + n
    return accelerators, cpu


def _times(pod: Obj) -> tuple[str | None, str | None]:
    """(when the pod's first container started, when its last ended: None while one still runs)."""
    starts, ends, running = [], [], False
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "running" in state:
            running = True
            if (state["running"] or {}).get("startedAt"):
                starts.append(str(state["running"]["startedAt"]))
        elif "terminated" in state:
            t = state["terminated"] or {}
            if t.get("startedAt"):
                starts.append(str(t["startedAt"]))
            if t.get("finishedAt"):
                ends.append(str(t["finishedAt"]))
        else:
            running = True  # waiting: a restart in place, or not started; not ended
    return (min(starts) if starts else None), (None if running or not ends else max(ends))


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def _seconds(start: str, end: str) -> float:
    return max((_parse(end) - _parse(start)).total_seconds(), 0.0)


def _tidy(x: float) -> int | float:
    return int(x) if float(x).is_integer() else round(x, 3)


def _add(into: dict[str, Any], what: Mapping[str, float], seconds: float) -> None:
    for name, n in what.items():
        into[name] = _tidy(float(into.get(name, 0)) + n * seconds)


def account(old: Obj | None, new: Obj, pods: Mapping[str, Obj], deleted: Iterable[str], now: datetime,
            claim_templates: Mapping[str, Obj] | None = None) -> Obj:  # fmt: skip
    """``new`` (a status) with ``usage`` brought up to date for this pass.

    ``old``: the status the pass started from; ``pods``: the job's pods by name; ``deleted``:
    uids of pods the pass deletes; ``claim_templates``: the job namespace's ResourceClaimTemplates
    by name, read when a run opens. A finished job's usage is final: nothing changes after.
    """
    if (old or {}).get("phase") in FINISHED:
        return new
    before: Obj = (old or {}).get(USAGE) or {}
    ledger: Obj = {
        "accelerators": dict(before.get("accelerators") or {}),
        "wasted": dict(before.get("wasted") or {}),
        "cpuSeconds": before.get("cpuSeconds", 0),
        "runs": int(before.get("runs") or 0),
        "open": {k: dict(v) for k, v in (before.get("open") or {}).items()},
        "closed": list(before.get("closed") or []),
    }
    by_uid = {str(p["metadata"]["uid"]): p for p in pods.values() if (p.get("metadata") or {}).get("uid")}
    ending = new.get("phase") in FINISHED
    going = set(deleted)
    for uid, pod in by_uid.items():
        if uid in ledger["open"] or uid in ledger["closed"]:
            continue
        start, _ = _times(pod)
        if start is None:
            continue
        accelerators, cpu = requested(pod, claim_templates)
        ledger["open"][uid] = {
            "pod": pod["metadata"].get("name", ""),
            "start": start,
            "accelerators": {k: _tidy(v) for k, v in accelerators.items()},
            "cpu": _tidy(cpu),
        }
    for uid in sorted(ledger["open"]):
        live = by_uid.get(uid)
        if not (ending or live is None or uid in going or is_deleting(live)):
            continue
        run = ledger["open"].pop(uid)
        end = (_times(live)[1] if live is not None else None) or timestamp(now)
        seconds = _seconds(str(run.get("start")), end)
        accelerators = {str(k): float(v) for k, v in (run.get("accelerators") or {}).items()}
        _add(ledger["accelerators"], accelerators, seconds)
        ledger["cpuSeconds"] = _tidy(float(ledger["cpuSeconds"]) + float(run.get("cpu") or 0) * seconds)
        ledger["runs"] += 1
        if not ending:
            _add(ledger["wasted"], accelerators, seconds)
        if live is not None:
            ledger["closed"].append(uid)
    ledger["closed"] = [u for u in ledger["closed"] if u in by_uid]
    # Accelerator-seconds of every resource seen, so a job that used none says 0 for none.
    for name in ledger["accelerators"]:
        ledger["wasted"].setdefault(name, 0)
    if ending and new.get("startTime"):
        ledger["wallSeconds"] = _tidy(_seconds(str(new["startTime"]), timestamp(now)))
    elif "wallSeconds" in before:
        ledger["wallSeconds"] = before["wallSeconds"]
    if not (ledger["open"] or ledger["closed"] or ledger["runs"] or "wallSeconds" in ledger):
        return new  # nothing ran yet: no usage key at all
    return {**new, USAGE: ledger}


def with_usage(job: Obj, old: Obj | None, plan: Plan, observed: Observed, now: datetime) -> Plan:
    """The plan with its status' usage accounted (the pass's step ``usage`` calls this once, on the core
    status ``old``). Not for a job being deleted: its pass writes nothing."""
    if (old or {}).get("phase") in FINISHED or job["metadata"].get("deletionTimestamp"):
        return plan
    uids = {n: (p.get("metadata") or {}).get("uid") for n, p in observed.pods.items()}
    deleted = {a.uid or uids.get(a.name) or "" for a in plan.actions if isinstance(a, Delete) and a.kind == "Pod"}
    status = account(old, plan.status, observed.pods, deleted - {""}, now, observed.claim_templates)
    return plan if status is plan.status else replace(plan, status=status)
