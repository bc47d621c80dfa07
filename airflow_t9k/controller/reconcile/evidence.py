"""Evidence survives clean-up: before ``cleanUpPolicy`` deletes a finished job's pods, what they
said goes into a ConfigMap ``<job>-evidence`` owned by the job. A stalled job's evidence (its
replicas' last lines before they restart: reconcile/stall.py) goes into the same ConfigMap under
keys of its own (``stall.*``, not ``*.log``, which readers take for a finished replica's); each
part says it is there by an annotation, since the cache keeps no evidence data.

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
from airflow_t9k.controller.reconcile.observe import is_deleting
from airflow_t9k.controller.reconcile.status import RESULT_LIMIT, StatusBuilder, bounded, container_summaries
from airflow_t9k.kinds.base import ANNOTATION_EVIDENCE_LINES, LABEL_PREFIX, Obj

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
# Which parts the ConfigMap holds: the job's end's ("true"), the last stall's (its key).
ANNOTATION_FINAL = f"{LABEL_PREFIX}/evidence-final"
ANNOTATION_STALL = f"{LABEL_PREFIX}/evidence-stall"
STALL_SUMMARY, STALL_EVENTS, STALL_LOG = "stall.summary.json", "stall.events.json", "stall.{pod}.txt"
# A stall's logs share this many bytes (at most MAX_LOG_BYTES a replica), so both parts fit in 1 MiB
# together: the end's at most 48 x 16 KiB of logs, 32 KiB of summary and its Events.
STALL_LOG_BUDGET = 96 * 1024


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
    if not pod_deletes or final_kept(job, observed) or _past_grace(sb):
        return actions
    pods = tuple(a.name for a in pod_deletes)[:MAX_REPLICAS]
    replicas = {n: {"phase": (observed.pods[n].get("status") or {}).get("phase"),
                    "containers": container_summaries(observed.pods[n], message=True)}
                for n in pods if n in observed.pods}  # fmt: skip
    summary = {"job": job["metadata"]["name"], "phase": sb.new.get("phase"), "keptAt": _now(sb),
               "rootCause": sb.new.get("rootCause"), "restartHistory": sb.new.get("restartHistory") or [],
               "replicas": replicas}  # fmt: skip
    manifest = _manifest(job, ANNOTATION_FINAL, "true", {SUMMARY_KEY: bounded(json.dumps(summary, sort_keys=True),
                                                                              8 * RESULT_LIMIT)})  # fmt: skip
    keep = KeepEvidence(manifest, pods, log_lines(job), merge=evidence_name(job) in observed.configmaps)
    return [keep, *(a for a in actions if a not in pod_deletes)]


def keep_stall(job: Obj, observed: Observed, sb: StatusBuilder, record: Obj) -> KeepEvidence:
    """A stall's evidence (reconcile/stall.py ``record``): every live replica's last log lines and
    state, and which replica reported last, before anything restarts; merged into the job's record."""
    pods = tuple(sorted(n for n, p in observed.pods.items() if not is_deleting(p)))[:MAX_REPLICAS]
    replicas = {n: {"phase": (observed.pods[n].get("status") or {}).get("phase"),
                    "containers": container_summaries(observed.pods[n])} for n in pods}  # fmt: skip
    progress = {k: v for k, v in (sb.new.get("progress") or {}).items() if k != "history"}
    summary = {"job": job["metadata"]["name"], "keptAt": _now(sb), "stall": record, "progress": progress,
               "replicas": replicas}  # fmt: skip
    data = {STALL_SUMMARY: bounded(json.dumps(summary, sort_keys=True), 2 * RESULT_LIMIT)}
    share = min(MAX_LOG_BYTES, STALL_LOG_BUDGET // max(len(pods), 1))
    return KeepEvidence(_manifest(job, ANNOTATION_STALL, str(record["key"]), data), pods, log_lines(job), STALL_LOG,
                        STALL_EVENTS, share, merge=evidence_name(job) in observed.configmaps)  # fmt: skip


def _manifest(job: Obj, annotation: str, value: str, data: Obj) -> Obj:
    meta = {"name": evidence_name(job), "annotations": {annotation: value}}
    return build_extra(job, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})


def _notes(job: Obj, observed: Observed) -> dict[str, str] | None:
    cm = observed.configmaps.get(evidence_name(job))
    return None if cm is None else ((cm.get("metadata") or {}).get("annotations") or {})


def final_kept(job: Obj, observed: Observed) -> bool:
    """The job's end's evidence is in its ConfigMap; one that says nothing of its parts is an earlier
    version's, which kept only the end's."""
    notes = _notes(job, observed)
    return notes is not None and (notes.get(ANNOTATION_FINAL) == "true" or ANNOTATION_STALL not in notes)


def stall_kept(job: Obj, observed: Observed, key: str) -> bool:
    """The evidence of the stall ``key`` is in the job's ConfigMap."""
    return (_notes(job, observed) or {}).get(ANNOTATION_STALL) == key


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
