"""A ``PassState`` as a step sees it, built without running the other steps."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.reconcile.desired import slots
from airflow_t9k.controller.reconcile.observe import Observed
from airflow_t9k.controller.reconcile.passstate import PassState, begin
from airflow_t9k.controller.reconcile.slotstate import recorded_restarts, slot_state
from airflow_t9k.kinds.base import InvalidSpec
from tests.builders import NOW

if TYPE_CHECKING:
    from collections.abc import Collection
    from datetime import datetime

Obj = dict[str, Any]


def state(job: Obj, *objects: Obj, status: Obj | None = None, now: datetime = NOW, queueing: str = "off",
          local_queues: Collection[str] = (), volcano: bool = False, observed: Observed | None = None,
          **fields: Any) -> PassState:  # fmt: skip
    """``begin`` for the job (with ``status``), its slots and their states, then ``fields`` set as given."""
    job = copy.deepcopy(job)
    if status is not None:
        job["status"] = status
    observed = observed or Observed.of(*objects, queueing=queueing, local_queues=local_queues, volcano=volcano)
    p = begin(job, observed, now)
    try:
        p.slots = slots(p.kind, p.job)
    except InvalidSpec:  # a step before "shape" may see such a job
        p.slots = []
    p.states = [slot_state(s, p.observed, recorded_restarts(p.sb)) for s in p.slots]
    for name, value in fields.items():
        setattr(p, name, value)
    return p


def condition(p: PassState, type_: str) -> tuple[str, str] | None:
    """(status, reason) of a condition in the status being built."""
    c = p.sb.condition(type_)
    return None if c is None else (c["status"], c["reason"])


def kinds(p: PassState) -> list[tuple[str, str, str]]:
    """(action, kind, name) of each action so far."""
    out = []
    for a in p.actions:
        kind = getattr(a, "kind", None) or ("Secret" if type(a).__name__ == "CreateSSHSecret" else "")
        out.append((type(a).__name__, kind, getattr(a, "name", "")))
    return out
