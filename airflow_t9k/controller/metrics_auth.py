"""Who may read /metrics when it is served securely (``--metrics-secure``; docs/design.md, "Metrics").

As controller-runtime's secure metrics server does (Kueue's, Kubeflow Trainer's): the caller sends
``Authorization: Bearer <token>``; the API server says whose it is (a TokenReview, the API
server's own audience) and whether that user may ``get`` the non-resource URL ``/metrics`` (a
SubjectAccessReview). Prometheus' ServiceAccount is bound to a ClusterRole with
``nonResourceURLs: ["/metrics"]`` (the chart's ``<release>-metrics-reader``).

Answers are cached by the token's digest (a yes 60 s, a no 10 s; the token itself is never kept),
and new tokens are checked at most ``rate`` a second: a scraper asks every 15-60 s with the same
token, so the API server sees one TokenReview and one SubjectAccessReview a minute per scraper.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.push_auth import Bucket, Refused, TokenCache, bearer
from airflow_t9k.k8s.errors import ApiError, Forbidden

if TYPE_CHECKING:
    from airflow_t9k.k8s.client import Kube

log = logging.getLogger(__name__)

TOKENREVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECTACCESSREVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ALLOWED_FOR = 60.0
REFUSED_FOR = 10.0
PATH = "/metrics"
CACHE_SIZE = 1000


def access_review(user: dict[str, Any], path: str = PATH) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user`` (a TokenReview's ``status.user``) may GET ``path``."""
    spec: dict[str, Any] = {"nonResourceAttributes": {"path": path, "verb": "get"}, "user": str(user.get("username") or "")}
    for key in ("groups", "uid"):
        if user.get(key):
            spec[key] = user[key]
    if user.get("extra"):
        spec["extra"] = user["extra"]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


class MetricsGuard:
    """``await guard.check(authorization_header)``: None when the caller may read /metrics, else
    the refusal (401: no token or not accepted; 403: not allowed; 429, 503)."""

    def __init__(self, kube: Kube, *, rate: float = 20.0, burst: float = 40.0,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.kube, self.clock = kube, clock
        self.reviews = Bucket(rate, burst, clock())
        self.cache: OrderedDict[str, tuple[float, Refused | None]] = OrderedDict()  # digest -> (until, answer)
        self._warned = False

    async def check(self, header: str | None) -> Refused | None:
        try:
            token = bearer(header)
        except Refused:
            return Refused(401, "Unauthorized", "a bearer token is required (a ServiceAccount allowed to get /metrics)")
        key, now = TokenCache.key(token), self.clock()
        if key in self.cache and self.cache[key][0] > now:
            self.cache.move_to_end(key)
            return self.cache[key][1]
        wait = self.reviews.take(self.clock())
        if wait > 0:
            return Refused(429, "TooManyRequests", "too many new tokens at once", retry_after=wait)
        try:
            answer = await self._decide(token)
        except (ApiError, OSError, asyncio.TimeoutError) as exc:
            if isinstance(exc, Forbidden) and not self._warned:
                self._warned = True
                log.warning("/metrics: the controller may not create tokenreviews or subjectaccessreviews (RBAC)")
            return Refused(503, "ServiceUnavailable", "the API server did not answer the check")
        self.cache[key] = (self.clock() + (REFUSED_FOR if answer is not None else ALLOWED_FOR), answer)
        self.cache.move_to_end(key)
        while len(self.cache) > CACHE_SIZE:
            self.cache.popitem(last=False)
        return answer

    async def _decide(self, token: str) -> Refused | None:
        review = await self.kube.create(TOKENREVIEWS, body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                            "spec": {"token": token}})  # fmt: skip
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return Refused(401, "Unauthorized", "the API server did not accept the token")
        user = status.get("user") or {}
        sar = await self.kube.create(SUBJECTACCESSREVIEWS, body=access_review(user))
        if not (sar.get("status") or {}).get("allowed"):
            return Refused(403, "Forbidden", f"{user.get('username')!s} may not get {PATH}")
        return None
