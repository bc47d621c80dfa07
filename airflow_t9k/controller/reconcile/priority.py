"""Priority without Kueue: ``t9kScheduler.priority`` as a PriorityClass on the replica pods (issue 47, item 3).

Seed 001 says a higher-priority replica "may evict other workloads on the node". Without the T9k
Scheduler (or Kueue, which orders and preempts Workloads) the priority was only a pod annotation,
which kube-scheduler never reads. Kube-scheduler orders pending pods and preempts by the pod's
``priorityClassName``, so the platform maps priorities to PriorityClasses (the controller's
``--priority-class-map``, or the classes the Helm chart installs) and every pod the controller
creates for a job with a ``t9kScheduler`` gets its class:

- ``LOW-HIGH=NAME`` (or ``N=NAME``) entries, comma-separated, ranges inclusive and disjoint;
  ``NAME`` may hold ``{priority}``, the job's priority (``0-100=airflow-t9k-priority-{priority}``:
  one class per value, as the chart installs them);
- a pod template's own ``priorityClassName`` (or ``priority``) wins: the pod is left as written;
- a priority no entry covers, or a class that does not exist, gives no class (a pod naming a
  missing class is refused by the API server, and a platform's mistake must not fail users'
  jobs): ``status.scheduling`` says why, and one Warning Event ``PriorityNotEnforced``.

Pure: the map and the cluster's PriorityClasses come in through ``Observed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.reconcile.desired import scheduler_settings

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.observe import Observed
    from airflow_t9k.kinds.base import JobKind

Obj = dict[str, Any]

PLACEHOLDER = "{priority}"
FLAG = "--priority-class-map"
_ENTRY = re.compile(r"^\s*(?P<low>\d+)\s*(?:-\s*(?P<high>\d+)\s*)?=\s*(?P<name>\S+)\s*$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Kubernetes reserves the system- prefix for its own classes (system-cluster-critical...): a job's
# priority must never lift its pods to the level of the cluster's own components.
RESERVED_PREFIX = "system-"
BY_KUEUE = "enforced by Kueue (the Workload's priority orders the queue and preempts)"


@dataclass(frozen=True)
class PriorityBand:
    """Priorities ``low``..``high`` (inclusive) get the PriorityClass ``name`` (``{priority}`` filled in)."""

    low: int
    high: int
    name: str

    def covers(self, priority: int) -> bool:
        return self.low <= priority <= self.high

    def class_name(self, priority: int) -> str:
        return self.name.replace(PLACEHOLDER, str(priority))

    def __str__(self) -> str:
        span = str(self.low) if self.low == self.high else f"{self.low}-{self.high}"
        return f"{span}={self.name}"


def parse_map(text: str | list[str] | None) -> tuple[PriorityBand, ...]:
    """``--priority-class-map`` (one string, or the flag given several times) as bands, lowest
    first; ValueError naming the entry that is wrong."""
    given = [text] if isinstance(text, str) else list(text or [])
    bands: list[PriorityBand] = []
    for part in (p for t in given for p in t.split(",")):
        if not part.strip():
            continue
        m = _ENTRY.match(part)
        if m is None:
            raise ValueError(f"{FLAG}: {part.strip()!r} is not LOW-HIGH=NAME or N=NAME (e.g. 0-49=batch-low)")
        low = int(m["low"])
        high = int(m["high"]) if m["high"] is not None else low
        name = m["name"]
        if high < low:
            raise ValueError(f"{FLAG}: {part.strip()!r}: {high} is below {low}")
        sample = name.replace(PLACEHOLDER, str(high))
        if not _DNS_SUBDOMAIN.match(sample) or len(sample) > 253:
            raise ValueError(f"{FLAG}: {name!r} is not a PriorityClass name (lower-case letters, digits, '-', '.'; "
                             f"{PLACEHOLDER} stands for the priority)")  # fmt: skip
        if sample.startswith(RESERVED_PREFIX):
            raise ValueError(f"{FLAG}: {name!r}: the system- classes are the cluster's own components'")
        bands.append(PriorityBand(low, high, name))
    bands.sort(key=lambda b: b.low)
    for a, b in zip(bands, bands[1:], strict=False):
        if b.low <= a.high:
            raise ValueError(f"{FLAG}: {a} and {b} overlap: a priority must name one class")
    return tuple(bands)


def describe_map(bands: tuple[PriorityBand, ...]) -> str:
    return ",".join(str(b) for b in bands)


@dataclass(frozen=True)
class Choice:
    """What the job's priority becomes here: a PriorityClass (``name``, its ``value``), or why none."""

    priority: Any
    name: str | None = None
    value: int | None = None
    why_not: str | None = None
    mapped: bool = False  # the controller has a map: a missing class is the platform's to fix, and warned of


def choose(job: Obj, observed: Observed) -> Choice | None:
    """The class for the job's ``t9kScheduler.priority``; None when the job sets no ``t9kScheduler``."""
    sched = scheduler_settings(job)
    if sched is None:
        return None
    priority = sched.get("priority")
    bands = observed.priority_map
    if not bands:
        return Choice(priority, why_not=f"the controller runs without {FLAG}")
    if isinstance(priority, bool) or not isinstance(priority, int):
        return Choice(priority, why_not=f"the priority {priority!r} is not an integer", mapped=True)
    band = next((b for b in bands if b.covers(priority)), None)
    if band is None:
        return Choice(priority, why_not=f"{FLAG} ({describe_map(bands)}) names no PriorityClass for it", mapped=True)
    name = band.class_name(priority)
    cls = observed.pod_priority_classes.get(name)
    if cls is None:
        return Choice(priority, name=None, why_not=f"PriorityClass {name} ({FLAG} {band}) does not exist", mapped=True)
    value = cls.get("value")
    return Choice(priority, name, int(value) if isinstance(value, int) and not isinstance(value, bool) else None, mapped=True)


def own_classes(kind: JobKind, job: Obj) -> dict[str, str]:
    """Replica types whose pod template names its own priority (class or value): it wins."""
    out: dict[str, str] = {}
    for spec in kind.replica_specs(job):
        pod_spec = (spec.template or {}).get("spec") or {}
        if pod_spec.get("priorityClassName"):
            out[spec.type] = str(pod_spec["priorityClassName"])
        elif pod_spec.get("priority") is not None:
            out[spec.type] = f"priority {pod_spec['priority']}"
    return out


def apply(choice: Choice | None, rendered: dict[str, Obj]) -> None:
    """The class on every pod about to be created that does not name its own priority.

    A template's ``priority`` counts as its own too: the API server refuses a pod whose
    ``priority`` differs from its class's value."""
    if choice is None or choice.name is None:
        return
    for pod in rendered.values():
        spec = pod.setdefault("spec", {})
        if not spec.get("priorityClassName") and spec.get("priority") is None:
            spec["priorityClassName"] = choice.name


def describe(choice: Choice, queued: bool, why_no_kueue: str, own: dict[str, str]) -> str:
    """``status.scheduling.priority``: what the priority does here, in words."""
    p = choice.priority
    if choice.name is not None:
        value = f" (value {choice.value})" if choice.value is not None else ""
        on_pods = (f"PriorityClass {choice.name}{value} on the pods: kube-scheduler places higher-priority pods first "
                   "and preempts lower-priority pods to make room for them")  # fmt: skip
        said = f"{p}: {BY_KUEUE}; {on_pods}" if queued else f"{p}: {on_pods}"
    elif queued:
        said = f"{p}: {BY_KUEUE}"
        if choice.mapped:
            said += f"; no PriorityClass on the pods: {choice.why_not}"
    else:
        said = f"{p}: ignored, only the pod annotation scheduler.tensorstack.dev/priority ({why_no_kueue}; {choice.why_not})"
    if own and choice.name is not None:
        kept = ", ".join(f"{t} ({c})" for t, c in sorted(own.items()))
        said += f"; replica type(s) {kept} keep their pod template's own"
    return said


def warning(choice: Choice | None) -> str | None:
    """The ``PriorityNotEnforced`` message: only where the platform asked for classes and one is missing."""
    if choice is None or choice.name is not None or not choice.mapped:
        return None
    return (f"spec.scheduler.t9kScheduler.priority {choice.priority} gets no PriorityClass: {choice.why_not}. The pods "
            "are created without one, so kube-scheduler neither orders nor preempts by this priority (docs/queueing.md, "
            "\"Priority without Kueue\").")  # fmt: skip
