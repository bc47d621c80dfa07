"""Who may push progress for a job, and how often (docs/progress.md, "The push path").

A request carries a projected service-account token with the endpoint's own audience. The
API server says whose it is (a TokenReview): the pod it was issued to, by name and uid. That
pod must be a replica of the job the URL names: in the job's namespace, controlled by the job
(its uid), under the name the controller gives that replica, and still the pod of that uid.

Pure pieces with a clock passed in: the token bucket, an unverified first look at the token
(it saves a TokenReview for what is surely refused: not a JWT, another audience, another
namespace, expired), what a TokenReview's answer means, the membership rule, and a bounded
cache of the answers. The endpoint (``push_server.py``) does the I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from airflow_t9k.kinds.base import LABEL_RANK, LABEL_TYPE, JobKind

Obj = dict[str, Any]

POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
SA_PREFIX = "system:serviceaccount:"
MAX_TOKEN = 16384  # characters of a bearer token looked at


class Bucket:
    """A token bucket: ``burst`` requests at once, then ``rate`` a second."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.at = burst, now

    def take(self, now: float) -> float:
        """0 when a request may go now (and it is counted), else the seconds until one may."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate if self.rate > 0 else float("inf")


@dataclass(frozen=True)
class Identity:
    """The pod a token was issued to, as the API server vouches."""

    namespace: str
    service_account: str
    pod_name: str
    pod_uid: str


class Refused(Exception):
    """A request refused: the HTTP code, a reason (Kubernetes' Status reasons) and a message
    safe to send back (it never repeats the token)."""

    def __init__(self, code: int, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.retry_after = code, reason, message, retry_after


def bearer(header: str | None) -> str:
    """The credential of an ``Authorization: Bearer <token>`` header (scheme in any case)."""
    parts = (header or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer" or len(parts[1]) > MAX_TOKEN:
        raise Refused(401, "Unauthorized", "an Authorization: Bearer header with the pod's progress token is required")
    return parts[1]


def claims(token: str) -> Obj | None:
    """The payload of a JWT, unverified (only to refuse early; the TokenReview decides)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def precheck(token: str, audience: str, namespace: str, now: float) -> None:
    """Refuse what no TokenReview would accept for this job, without asking the API server."""
    payload = claims(token)
    if payload is None:
        raise Refused(401, "Unauthorized", "the bearer token is not a service-account token (JWT)")
    aud = payload.get("aud")
    auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if audience not in auds:
        raise Refused(401, "Unauthorized", f"the token is not for this endpoint: its audience must be {audience!r} "
                                           "(the projected token the controller mounts in each replica)")  # fmt: skip
    exp = payload.get("exp")
    if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp <= now:
        raise Refused(401, "Unauthorized", "the token has expired (re-read the token file: the kubelet renews it)")
    k8s = payload.get("kubernetes.io")
    if not isinstance(k8s, dict) or not isinstance(k8s.get("pod"), dict):
        raise Refused(401, "Unauthorized", "the token is not bound to a pod (use the projected token the controller mounts)")
    if k8s.get("namespace") != namespace:
        raise Refused(403, "Forbidden", f"the token's pod is not in namespace {namespace!r}, the job's")


def identity_of(review: Obj, audience: str) -> Identity:
    """The pod a TokenReview's answer vouches for; Refused when it vouches for none."""
    status = review.get("status") or {}
    if not status.get("authenticated"):
        raise Refused(401, "Unauthorized", "the API server did not accept the token" +
                      (f": {str(status['error'])[:200]}" if status.get("error") else ""))  # fmt: skip
    if audience not in (status.get("audiences") or []):
        raise Refused(401, "Unauthorized", f"the token is not valid for audience {audience!r}")
    user = status.get("user") or {}
    name = str(user.get("username") or "")
    extra = user.get("extra") or {}
    pods, uids = extra.get(POD_NAME) or [], extra.get(POD_UID) or []
    ns, _, sa = name[len(SA_PREFIX) :].partition(":") if name.startswith(SA_PREFIX) else ("", "", "")
    if not ns or not sa or len(pods) != 1 or len(uids) != 1:
        raise Refused(403, "Forbidden", "the token is not a service-account token bound to a pod")
    return Identity(ns, sa, str(pods[0]), str(uids[0]))


def _controller_uid(obj: Obj) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return str(ref.get("uid") or "")
    return None


def membership(kind: JobKind, job: Obj, pod: Obj | None, who: Identity) -> str | None:
    """None when ``who``'s pod is a replica of ``job``; else why not (a message to send back)."""
    meta = job["metadata"]
    where = f"{job['kind']} {meta['namespace']}/{meta['name']}"
    if who.namespace != meta["namespace"]:
        return f"the token's pod is in namespace {who.namespace!r}, not the job's"
    if pod is None:
        return f"pod {who.pod_name} is not a replica of {where}"
    pmeta = pod.get("metadata") or {}
    if str(pmeta.get("uid") or "") != who.pod_uid or pmeta.get("namespace") != meta["namespace"]:
        return f"pod {who.pod_name} is not a replica of {where} (not the pod the token was issued to)"
    if _controller_uid(pod) != meta.get("uid"):
        return f"pod {who.pod_name} is not a replica of {where}"
    labels = pmeta.get("labels") or {}
    try:
        own = kind.pod_name(job, str(labels.get(LABEL_TYPE)), int(str(labels.get(LABEL_RANK))))
    except (TypeError, ValueError, KeyError):
        own = None
    if own != pmeta.get("name"):
        return f"pod {who.pod_name} is not a replica of {where} (not a name the controller gives its replicas)"
    return None


class TokenCache:
    """TokenReview answers by the token's digest, until a deadline; at most ``size`` entries,
    the least recently used going first. The token itself is never kept."""

    def __init__(self, size: int = 20000) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[float, Identity | Refused]] = OrderedDict()

    @staticmethod
    def key(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def get(self, key: str, now: float) -> Identity | Refused | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= now:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)  # the least recently used goes first
        return entry[1]

    def put(self, key: str, answer: Identity | Refused, until: float) -> None:
        self._entries[key] = (until, answer)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
