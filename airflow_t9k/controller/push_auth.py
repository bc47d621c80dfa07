"""Who may push progress for a job, and how often (docs/progress.md, "The push path").

A request carries a projected service-account token with the endpoint's own audience. The
API server says whose it is (a TokenReview): the pod it was issued to, by name and uid. That
pod must be a replica of the job the URL names: in the job's namespace, controlled by the job
(its uid), under the name the controller gives that replica, and still the pod of that uid.

Pure pieces with a clock passed in: the token bucket (one over all namespaces, one per
namespace), an unverified first look at the token (it saves a TokenReview for what is surely
refused: not a JWT, another audience, another namespace, expired), a screen of the pod the token
claims against the controller's cache (the job, the replica, its address), what a
TokenReview's answer means, the membership rule, and a bounded cache of the answers. The
endpoint (``push_server.py``) does the I/O. The first look and the screen only refuse early,
from claims anyone can forge; they never accept: the TokenReview does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, TypeAlias

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


class NamespaceBuckets:
    """A token bucket per namespace, so that one namespace's new tokens cannot take every
    TokenReview: at most ``size`` namespaces remembered, the least recently used forgotten first
    (a namespace forgotten starts again with a full bucket)."""

    def __init__(self, rate: float, burst: float, size: int = 1024) -> None:
        self.rate, self.burst, self.size = rate, burst, size
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()

    def take(self, namespace: str, now: float) -> float:
        """As ``Bucket.take``, from ``namespace``'s own bucket."""
        bucket = self._buckets.get(namespace)
        if bucket is None:
            bucket = self._buckets[namespace] = Bucket(self.rate, self.burst, now)
            while len(self._buckets) > self.size:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(namespace)
        return bucket.take(now)

    def __len__(self) -> int:
        return len(self._buckets)


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


def precheck(token: str, audience: str, namespace: str, now: float) -> Identity:
    """Refuse what no TokenReview would accept for this job, without asking the API server; else
    the pod the token claims to be bound to (unverified: only to look it up, see ``screen``)."""
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
    pod, sa = k8s["pod"], k8s.get("serviceaccount")
    name, uid = pod.get("name"), pod.get("uid")
    if not isinstance(name, str) or not isinstance(uid, str) or not name or not uid:
        raise Refused(401, "Unauthorized", "the token is not bound to a pod (use the projected token the controller mounts)")
    account = sa.get("name") if isinstance(sa, dict) else None
    return Identity(namespace, account if isinstance(account, str) else "", name, uid)


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


IP: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address


def address(text: Any) -> IP | None:
    """An IP address as text, normalized: an IPv4-mapped IPv6 address (``::ffff:10.0.0.7``, how a
    dual-stack listener sees an IPv4 peer) is the IPv4 address, a zone (``%eth0``) is dropped,
    and IPv6's many spellings compare equal. None for anything else."""
    if not isinstance(text, str):
        return None
    try:
        ip = ipaddress.ip_address(text.strip().split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def pod_addresses(pod: Obj) -> set[IP]:
    """The addresses a pod's status gives it (``podIP`` and every ``podIPs``: dual stack)."""
    status = pod.get("status")
    if not isinstance(status, dict):
        return set()
    ips = [status.get("podIP")] + [e.get("ip") for e in status.get("podIPs") or [] if isinstance(e, dict)]
    return {ip for ip in map(address, ips) if ip is not None}


def screen(kind: JobKind, name: str, job: Obj | None, unmanaged: str | None, pod: Obj | None, claimed: Identity,
           remote: str | None, check_source: bool = True) -> None:  # fmt: skip
    """Refuse, from the controller's cache alone and before any TokenReview, a request that the
    TokenReview could only lead to a refusal: ``claimed`` is the pod the token says it was issued
    to (unverified, ``precheck``), ``job`` the cached job the URL names (None: none), ``unmanaged``
    why its namespace is not reconciled here (None: it is), ``pod`` the cached pod of the claimed
    name, ``remote`` the request's source address.

    The job must exist and be managed, and the claimed pod must be one of its replicas by name and
    uid (``membership``); one answer for all of these, so that a caller nobody has authenticated
    learns nothing of the jobs of a namespace. Then, with ``check_source``, the request must come
    from one of that pod's addresses: a forged token must name a live replica, its uid (which
    only those who may read the pod know) and send from that replica. A pod with no address in
    the cache yet (a new replica whose status has not reached the controller) is asked to send
    again (503). Passing says nothing of the token: the TokenReview decides."""
    where = f"{kind.resource.kind} {claimed.namespace}/{name}"
    if pod is None or job is None or unmanaged is not None or membership(kind, job, pod, claimed) is not None:
        raise Refused(403, "Forbidden", f"pod {claimed.pod_name} is not a replica of {where} here: no such job, its "
                      "namespace is not reconciled here, or the token's pod is not one of its replicas (a pod of "
                      "another job, or not the pod the token was issued to: a replaced replica's old token)")  # fmt: skip
    if not check_source:
        return
    mine = pod_addresses(pod)
    if not mine:
        raise Refused(503, "ServiceUnavailable", f"pod {claimed.pod_name} has no IP address in the controller's cache yet; "
                      "send again", retry_after=1)  # fmt: skip
    if address(remote) not in mine:
        raise Refused(403, "Forbidden", f"the request comes from {remote or 'an unknown address'}, not from an address "
                      f"of pod {claimed.pod_name}: a replica pushes from its own pod (a proxy or NAT between the pods and "
                      "the controller hides it: run the controller with --progress-check-source-ip off)")  # fmt: skip


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
