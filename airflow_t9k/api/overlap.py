"""What a task does when the job an earlier DAG run of it submitted still runs (``overlap=``).

A daily schedule whose training takes 30 hours starts the next run's task while the last run's
job holds the GPUs. Which job that is comes from Airflow's records, never from labels: XCom
``t9k_job`` of the latest earlier run of the same task and map index (the identity its operator
pushed before waiting, uid included), checked against the job the cluster has under that name.
A job whose uid differs is another object that took the name, not the earlier run's job.

- ``allow``: run beside it (what Airflow does without this);
- ``wait``: wait until it ends, deferred or on the worker, then decide again;
- ``skip``: skip this run's task, saying which job still runs;
- ``supersede``: end the older job as ``on_kill_action`` says, then train this run's data.

A job paused (``spec.runMode.pause``) holds no pods, so it does not hold this run back. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_t9k.api.outcome import interpret

Obj = dict[str, Any]

MODES = ("allow", "wait", "skip", "supersede")
PROCEED, WAIT, SKIP, SUPERSEDE = "proceed", "wait", "skip", "supersede"
RUN_ID = "airflow-t9k.io/run-id"


def check_mode(value: Any) -> str:
    if value not in MODES:
        raise ValueError(f"overlap must be one of {MODES}, got {value!r}")
    return str(value)


def earlier_identity(value: Any) -> Obj | None:
    """XCom ``t9k_job`` as an earlier run pushed it: kind, name, namespace and uid, or None for
    anything else (a run that pushed nothing, or a value not of this operator's shape)."""
    if not isinstance(value, dict):
        return None
    if not all(isinstance(value.get(k), str) and value.get(k) for k in ("kind", "name", "namespace", "uid")):
        return None
    return {k: value[k] for k in ("kind", "name", "namespace", "uid")}


@dataclass(frozen=True)
class Decision:
    action: str  # PROCEED, WAIT, SKIP or SUPERSEDE
    why: str


def holds(job: Obj | None, identity: Obj, this_run: str) -> str | None:
    """Why ``job`` (what the cluster has under the earlier identity's name) still holds this
    task back, or None when it does not: gone, replaced, ended, paused, or this run's own."""
    if job is None:
        return None
    meta = job.get("metadata") or {}
    if meta.get("uid") != identity["uid"]:
        return None  # another object took the name: the earlier run's job is gone
    if (meta.get("annotations") or {}).get(RUN_ID) == this_run:
        return None  # this run's own job (a try of this run is not an earlier run)
    if (((job.get("spec") or {}).get("runMode") or {}).get("pause") or {}).get("enabled") is True:
        return None  # paused: it holds no pods
    state = interpret(job)
    if state.terminal:
        return None
    run = (meta.get("annotations") or {}).get(RUN_ID) or "an earlier run"
    return f"{identity['kind']} {identity['namespace']}/{identity['name']} of run {run} is still {state.phase or 'Pending'}"


def decide(mode: str, job: Obj | None, identity: Obj | None, this_run: str) -> Decision:
    """What this try does about the earlier run's job (``identity`` from its XCom, ``job`` as read)."""
    if mode == "allow" or identity is None:
        return Decision(PROCEED, "")
    why = holds(job, identity, this_run)
    if why is None:
        return Decision(PROCEED, "")
    return Decision({"wait": WAIT, "skip": SKIP, "supersede": SUPERSEDE}[mode], why)
