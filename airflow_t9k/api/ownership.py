"""Which children are a job's own: the controller's record in the job's status. Pure.

A child's labels, name and ownerReferences are written by whoever creates it, and nothing
checks an ownerReference at creation: anyone who may create a pod in the namespace can make one
named ``<job>-worker-0`` whose controller reference names the job (a uid is no secret). Had the
controller believed that, the pod would decide the job's outcome, its result (XCom, asset URI),
its checkpoint; a pre-made Service would capture its rendezvous address; a pre-made evidence
ConfigMap would tell the task log whatever its author wanted.

So the controller records what it creates in the job's status, which only it may write
(``status.created``: kind -> name -> uid), as ``status.sshSecret`` already did for the SSH
Secret. Before creating, it records the decision (``{"at": <time>}``, written with the status
that comes first in every pass); after the create, the uid. A child counts as the job's only
when its uid is on record, or, after a controller stopped between its create and the record,
when a decision to create it is on record from before the child existed. A child of the name
that the controller did not create fails the job, naming its owner; it is never adopted: its
uid goes on record as refused (``{"refused": uid}``), so no later pass takes it for the child a
decision was recorded for (creation times have one-second resolution: one made in the second
of the decision would otherwise pass for it).

Jobs planned before the record existed (``startTime`` in status, no ``created``) keep the old
rule, their ownerReferences, until the controller's next pass records what they have.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
CREATED = "created"  # status key


def record(status: Obj | None) -> dict[str, dict[str, Obj]]:
    """``status.created`` as kind -> name -> entry (``{"uid"}`` or ``{"at"}``), whatever it holds."""
    raw = (status or {}).get(CREATED)
    if not isinstance(raw, dict):
        return {}
    return {str(k): {str(n): e for n, e in v.items() if isinstance(e, dict)} for k, v in raw.items() if isinstance(v, dict)}


def legacy(status: Obj | None) -> bool:
    """A job the controller planned before it kept this record: it has run, and has no record."""
    return bool(status) and "startTime" in (status or {}) and CREATED not in (status or {})


def recorded_uid(status: Obj | None, kind: str, name: str) -> str | None:
    uid = record(status).get(kind, {}).get(name, {}).get("uid")
    return str(uid) if uid else None


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def verdict(status: Obj | None, kind: str, name: str, obj: Obj) -> str | None:
    """Why ``obj`` (named ``name``) is the job's: "recorded" (its uid is on record), "decided"
    (a create of it was on record before it was made: the controller stopped before recording
    its uid), "legacy" (a job from before the record); None: it is not the job's."""
    if legacy(status):
        return "legacy"
    entry = record(status).get(kind, {}).get(name)
    if entry is None or entry.get("refused"):
        return None
    meta = _meta(obj)
    if entry.get("uid"):
        return "recorded" if entry["uid"] == meta.get("uid") else None
    at, created = entry.get("at"), meta.get("creationTimestamp")
    # RFC 3339 in UTC sorts as text. A child made before the decision is someone else's.
    return "decided" if isinstance(at, str) and isinstance(created, str) and created >= at else None


def deciding(status: Obj, creates: list[tuple[str, str]], now: str) -> Obj:
    """``status`` with the decision to create each (kind, name) of ``creates`` on record (a
    decision already on record, from a pass that stopped before its create, keeps its time).
    Always with the record itself, so a job planned from now on is never legacy."""
    out = dict(status)
    created = {k: dict(v) for k, v in record(status).items()}
    for kind, name in creates:
        entry = created.setdefault(kind, {}).get(name)
        if entry is None or entry.get("uid"):
            created[kind][name] = {"at": now}
    out[CREATED] = created
    return out


def owner_of(obj: Obj) -> str:
    """Who ``obj`` names as its controller, for a message."""
    for ref in _meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return f"its controller is {ref.get('kind')} {ref.get('name')} (uid {ref.get('uid')})"
    return "it names no controller"
