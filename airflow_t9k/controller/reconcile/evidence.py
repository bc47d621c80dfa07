"""Evidence survives clean-up: before ``cleanUpPolicy`` deletes a finished job's pods, what they
said goes into a ConfigMap ``<job>-evidence`` owned by the job.

The ConfigMap (not Airflow's object storage) because the controller, not Airflow, deletes the
pods: it is the one that knows when, it runs without Airflow, and ``kubectl`` users get the same
record. It is bounded (``MAX_LOG_BYTES`` per replica, ``MAX_EVENTS`` Events) so it always fits,
and garbage collection removes it with its job.

Decide durably, then act: the pods are deleted only once the ConfigMap is observed, so a crash
between the two loses nothing; a ConfigMap that cannot be written (a policy refuses it) holds the
clean-up back for ``GRACE`` seconds at most.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import Action, Delete, KeepEvidence
from airflow_t9k.controller.reconcile.desired import build_extra
from airflow_t9k.controller.reconcile.status import RESULT_LIMIT, StatusBuilder, bounded, container_summaries
from airflow_t9k.kinds.base import ANNOTATION_EVIDENCE_LINES, Obj

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.observe import Observed

SUFFIX = "-evidence"
ANNOTATION_LINES = ANNOTATION_EVIDENCE_LINES
DEFAULT_LINES = 50
MAX_LINES = 500
MAX_LOG_BYTES = 16 * 1024  # per replica: 64 replicas stay under a ConfigMap's 1 MiB
MAX_REPLICAS = 48
MAX_EVENTS = 50
GRACE = 60.0
SUMMARY_KEY = "summary.json"


def evidence_name(job: Obj) -> str:
    return f"{job['metadata']['name']}{SUFFIX}"


def log_lines(job: Obj) -> int:
    raw = (job["metadata"].get("annotations") or {}).get(ANNOTATION_LINES)
    try:
        lines = int(raw) if raw is not None else DEFAULT_LINES
    except ValueError:
        lines = DEFAULT_LINES
    return max(0, min(lines, MAX_LINES))


def keep_first(job: Obj, observed: Observed, sb: StatusBuilder, actions: list[Action]) -> list[Action]:
    """``actions`` with the pods' deletes held back until their evidence is kept."""
    pod_deletes = [a for a in actions if isinstance(a, Delete) and a.kind == "Pod"]
    if not pod_deletes or evidence_name(job) in observed.configmaps or _past_grace(sb):
        return actions
    pods = tuple(a.name for a in pod_deletes)[:MAX_REPLICAS]
    replicas = {n: {"phase": (observed.pods[n].get("status") or {}).get("phase"),
                    "containers": container_summaries(observed.pods[n], message=True)}
                for n in pods if n in observed.pods}  # fmt: skip
    summary = {"job": job["metadata"]["name"], "phase": sb.new.get("phase"), "keptAt": _now(sb),
               "rootCause": sb.new.get("rootCause"), "restartHistory": sb.new.get("restartHistory") or [],
               "replicas": replicas}  # fmt: skip
    manifest = build_extra(job, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": evidence_name(job)},
                                 "data": {SUMMARY_KEY: bounded(json.dumps(summary, sort_keys=True),
                                                               8 * RESULT_LIMIT)}})  # fmt: skip
    return [KeepEvidence(manifest, pods, log_lines(job)), *(a for a in actions if a not in pod_deletes)]


def _now(sb: StatusBuilder) -> str:
    return sb.now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _past_grace(sb: StatusBuilder) -> bool:
    """Whether the job ended more than ``GRACE`` seconds ago (its Completed or Failed condition)."""
    ended = [c.get("lastTransitionTime") for c in sb.new.get("conditions") or []
             if c.get("type") in ("Completed", "Failed") and c.get("status") == "True"]  # fmt: skip
    if not ended or not ended[0]:
        return False
    at = datetime.fromisoformat(str(ended[0]).replace("Z", "+00:00"))
    return (sb.now - at).total_seconds() > GRACE
