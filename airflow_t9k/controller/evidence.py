"""The I/O half of keeping a job's evidence (the decision is reconcile/evidence.py): each pod's
last log lines and the job's Events, read just before clean-up deletes the pods, or before a
stalled job's replicas restart (reconcile/stall.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.reconcile.evidence import MAX_EVENTS, MAX_LOG_BYTES
from airflow_t9k.controller.reconcile.status import bounded
from airflow_t9k.k8s.errors import ApiError

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.actions import KeepEvidence

Obj = dict[str, Any]
log = logging.getLogger(__name__)


async def fill(kube: Any, ns: str, job: Obj, action: KeepEvidence) -> Obj:
    """The ConfigMap of ``action`` with the logs and Events added; what cannot be read says so."""
    manifest = json.loads(json.dumps(action.manifest))
    data: dict[str, str] = manifest.setdefault("data", {})

    async def one(pod: str) -> None:
        if action.lines <= 0:
            return
        try:
            text = await kube.request_text(f"/api/v1/namespaces/{ns}/pods/{pod}/log",
                                           {"tailLines": action.lines, "limitBytes": action.log_bytes})  # fmt: skip
        except ApiError as exc:  # e.g. the node is gone with the pod's log
            text = f"(the log could not be read: {bounded(exc.message, 300)})\n"
        except (OSError, asyncio.TimeoutError) as exc:
            text = f"(the log could not be read: {exc!r})\n"
        data[action.log_key.format(pod=pod)] = text[-min(action.log_bytes, MAX_LOG_BYTES) :]

    await asyncio.gather(*(one(p) for p in action.pods))
    try:
        found = await kube.get(f"/api/v1/namespaces/{ns}/events",
                               query={"fieldSelector": f"involvedObject.uid={job['metadata'].get('uid', '')}"})  # fmt: skip
        events = sorted(found.get("items") or [], key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        data[action.events_key] = json.dumps([
            {"type": e.get("type"), "reason": e.get("reason"), "message": bounded(str(e.get("message") or ""), 500),
             "count": e.get("count"), "time": e.get("lastTimestamp") or e.get("eventTime")}
            for e in events[-MAX_EVENTS:]
        ])  # fmt: skip
    except (ApiError, OSError, asyncio.TimeoutError) as exc:
        log.warning("events of %s/%s not kept: %s", ns, job["metadata"]["name"], exc)
    return manifest
