"""The controller's progress endpoint: replicas POST their progress over HTTPS (docs/progress.md, "The push path").

``POST /apis/<group>/<version>/namespaces/<ns>/<plural>/<job>/progress`` with
``Authorization: Bearer <projected token>`` and a JSON body (``api/progress_push.py``: Kubeflow
Trainer's ``{"trainerStatus": ...}`` or ours). In order, each step cheaper than the next:

1. the path names a job kind this controller reconciles (404), and this replica is the leader
   (503 with ``Retry-After``: a standby's values would never reach a status);
2. the token at a first, unverified look: a JWT for our audience, bound to a pod of the job's
   namespace, not expired (401/403);
3. the controller's cache, before any TokenReview, for the pod the token claims: the job exists
   in a managed namespace and the pod is one of its replicas by name and uid (403, one answer
   for all), and the request comes from that pod's address (403; 503 while the cache has no
   address for it yet; ``check_source``). A forged token naming a made-up pod ends here;
4. the API server's TokenReview, at most ``namespace_review_rate`` a second per namespace and
   ``review_rate`` over all (429), its answer cached by the token's digest (5 minutes at most,
   never past the token's expiry; a refusal 10 s);
5. the job exists (404) in a managed namespace (403), and the pod the TokenReview vouches for is
   one of its replicas: same namespace and uid, controlled by the job, under a replica's name
   (403): 3 again, on the verified identity and the cache as it is after the TokenReview;
6. at most ``rate`` requests a second per job, ``burst`` at once (429 with ``Retry-After``);
7. the body: at most 64 KB (413), JSON (400), one of the two shapes (422), at least one value
   kept (422 naming what was ignored).

An accepted report is merged into the job's latest values (``pushed.py``) and answered 200 with
what was kept and ignored; the next reconcile pass writes it to ``status.progress``, rate-limited
and bounded like the values a log carries. Errors are Kubernetes ``Status`` objects.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from airflow_t9k.api.progress_push import MAX_BODY, BadBody, parse_push
from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.controller.push_auth import (
    Bucket,
    Identity,
    NamespaceBuckets,
    Refused,
    TokenCache,
    bearer,
    claims,
    identity_of,
    membership,
    precheck,
    screen,
)
from airflow_t9k.controller.push_listener import MAX_CONNECTIONS, MAX_PER_SOURCE, Listener
from airflow_t9k.controller.reconcile.push import AUDIENCE
from airflow_t9k.k8s.errors import ApiError, Forbidden
from airflow_t9k.kinds.registry import KINDS

if TYPE_CHECKING:
    from airflow_t9k.controller.pushed import PushedReports
    from airflow_t9k.k8s.client import Kube
    from airflow_t9k.kinds.base import Obj

log = logging.getLogger(__name__)

TOKENREVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
CACHE_SECONDS = 300.0  # a TokenReview's yes is believed this long at most (never past the token's exp)
REFUSAL_SECONDS = 10.0  # and its no this long
KEEPALIVE = 15.0  # seconds an idle connection stays open (a replica pushing every few seconds keeps its own)
# (group, version, plural) -> kind
_BY_PATH = {(r.group, r.version, r.plural): r.kind for r in RESOURCES.values()}


class Host(Protocol):
    """What the endpoint needs of the controller (``runner.Controller``)."""

    metrics: Counter[str]
    pushed: PushedReports | None

    def leading(self) -> bool: ...
    def cached_job(self, kind: str, namespace: str, name: str) -> Obj | None: ...
    def cached_pod(self, namespace: str, name: str) -> Obj | None: ...
    def why_not_managed(self, namespace: str) -> str | None: ...


def status(code: int, reason: str, message: str) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip


class ProgressEndpoint:
    def __init__(self, host: Host, kube: Kube, *, kinds: list[str], audience: str = AUDIENCE, review_rate: float = 100.0,
                 review_burst: float = 200.0, namespace_review_rate: float = 25.0, namespace_review_burst: float = 50.0,
                 check_source: bool = True, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.host = host
        self.kube = kube  # for TokenReviews
        self.kinds = set(kinds)
        self.audience = audience
        self.check_source = check_source  # the request must come from the pod's own address
        self.clock, self.wall = clock, wall
        self.reviews = Bucket(review_rate, review_burst, clock())
        self.namespace_reviews = NamespaceBuckets(namespace_review_rate, namespace_review_burst)
        self.cache = TokenCache()
        self._inflight: dict[str, asyncio.Future[Identity]] = {}
        self._rbac_warned = False

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/progress", self.handle)
        app.router.add_route("*", "/{path:.*}", self.elsewhere)
        return app

    async def elsewhere(self, request: web.Request) -> web.Response:
        return web.json_response(status(404, "NotFound", "not a progress URL"), status=404)

    async def handle(self, request: web.Request) -> web.Response:
        m = self.host.metrics
        try:
            if request.method != "POST":
                raise Refused(405, "MethodNotAllowed", "only POST is served here")
            body = await self._handle(request)
        except Exception as exc:  # noqa: BLE001 - one request's fault is answered, never carried on
            r = exc if isinstance(exc, Refused) else Refused(500, "InternalError", "the controller failed on this report")
            if not isinstance(exc, Refused):
                log.warning("progress endpoint: %s failed: %r", request.path, exc)
            m[f"progress_push_{r.code}"] += 1
            headers = {"Retry-After": str(max(1, math.ceil(r.retry_after)))} if r.retry_after is not None else None
            return web.json_response(status(r.code, r.reason, r.message), status=r.code, headers=headers)
        m["progress_push"] += 1
        return web.json_response(body)

    async def _handle(self, request: web.Request) -> Obj:
        info = request.match_info
        ns, name = info["namespace"], info["name"]
        kind = _BY_PATH.get((info["group"], info["version"], info["plural"]))
        if kind is None or kind not in self.kinds:
            raise Refused(404, "NotFound", f"no job kind {info['plural']}.{info['group']}/{info['version']} here")
        if not self.host.leading():
            raise Refused(503, "ServiceUnavailable", "this controller replica is not the leader; send again", retry_after=1)
        token = bearer(request.headers.get("Authorization"))
        claimed = precheck(token, self.audience, ns, self.wall())
        job = self.host.cached_job(kind, ns, name)
        screen(KINDS[kind], name, job, self.host.why_not_managed(ns) if job is not None else None,
               self.host.cached_pod(ns, claimed.pod_name), claimed, request.remote, self.check_source)  # fmt: skip
        who = await self.identify(token, ns)
        job = self.host.cached_job(kind, ns, name)  # again: the TokenReview took a while
        if job is None:
            raise Refused(404, "NotFound", f"{kind} {ns}/{name} not found")
        why = self.host.why_not_managed(ns)
        if why is not None:
            raise Refused(403, "Forbidden", f"jobs in namespace {ns} are not reconciled here: {why}")
        refusal = membership(KINDS[kind], job, self.host.cached_pod(ns, who.pod_name), who)
        if refusal is not None:
            raise Refused(403, "Forbidden", refusal)
        pushed = self.host.pushed
        if pushed is None:  # the endpoint runs only with the push path on
            raise Refused(404, "NotFound", "the push path is off")
        key = (kind, ns, name)
        wait = pushed.admit(key, job, self.clock())
        if wait > 0:
            raise Refused(429, "TooManyRequests", f"at most {pushed.rate:g} reports a second per job", retry_after=wait)
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise Refused(413, "RequestEntityTooLarge", f"the body may be at most {MAX_BODY} bytes") from None
        try:
            parsed = parse_push(json.loads(raw))
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, BadBody):
                raise Refused(422, "Invalid", str(exc)) from None
            raise Refused(400, "BadRequest", "the body is not JSON") from None
        if parsed.report is None and not parsed.empty:
            raise Refused(422, "Invalid", "nothing in the body is a value kept in status.progress" +
                          (f"; ignored: {', '.join(parsed.ignored[:20])}" if parsed.ignored else ""))  # fmt: skip
        if parsed.report is not None:
            pushed.add(key, job, who.pod_name, parsed.report)
        return {"kind": "ProgressReport", "accepted": parsed.report or {}, "ignored": parsed.ignored}

    # -- who is calling --------------------------------------------------------------------------
    async def identify(self, token: str, namespace: str) -> Identity:
        """Who the API server says the token's pod is (``precheck`` and ``screen`` passed first)."""
        key = TokenCache.key(token)
        known = self.cache.get(key, self.clock())
        if isinstance(known, Refused):
            raise known
        if known is not None:
            return known
        running = self._inflight.get(key)
        if running is not None:  # the same new token twice at once: one TokenReview
            return await asyncio.shield(running)
        now = self.clock()
        wait = self.namespace_reviews.take(namespace, now)  # the namespace's budget first: a flood spends only its own
        if wait > 0:
            raise Refused(429, "TooManyRequests", f"too many new tokens from namespace {namespace} to check at once; "
                          "send again", retry_after=wait)  # fmt: skip
        wait = self.reviews.take(now)
        if wait > 0:
            raise Refused(429, "TooManyRequests", "too many new tokens to check at once; send again", retry_after=wait)
        future: asyncio.Future[Identity] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            who = await self._review(token, key)
            future.set_result(who)
            return who
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._inflight[key]

    async def _review(self, token: str, key: str) -> Identity:
        self.host.metrics["token_review"] += 1
        spec = {"token": token, "audiences": [self.audience]}
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        try:
            review = await self.kube.create(TOKENREVIEWS, body=body)
        except Forbidden:
            if not self._rbac_warned:
                self._rbac_warned = True
                log.warning("progress endpoint: the controller may not create tokenreviews (RBAC): every push is refused")
            raise Refused(503, "ServiceUnavailable", "the controller cannot check tokens (RBAC: create tokenreviews)",
                          retry_after=30) from None  # fmt: skip
        except (ApiError, OSError, asyncio.TimeoutError) as exc:
            log.debug("progress endpoint: TokenReview failed: %s", type(exc).__name__)
            raise Refused(503, "ServiceUnavailable", "the API server did not answer the token check; send again",
                          retry_after=2) from None  # fmt: skip
        now = self.clock()
        try:
            who = identity_of(review, self.audience)
        except Refused as r:
            self.cache.put(key, r, now + REFUSAL_SECONDS)
            raise
        exp = (claims(token) or {}).get("exp")
        until = now + CACHE_SECONDS
        if isinstance(exp, (int, float)) and not isinstance(exp, bool):
            until = min(until, now + (float(exp) - self.wall()))
        self.cache.put(key, who, until)
        return who


class PushServer:
    """The endpoint's app behind its listener (``push_listener.py``); ``cleanup`` stops both."""

    def __init__(self, runner: web.AppRunner, listener: Listener) -> None:
        self.runner, self.listener = runner, listener

    async def cleanup(self) -> None:
        await self.listener.close()
        await self.runner.cleanup()


async def serve_push(endpoint: ProgressEndpoint, address: str, port: int, context: Any, *,
                     max_connections: int = MAX_CONNECTIONS, max_per_source: int = MAX_PER_SOURCE) -> PushServer:  # fmt: skip
    """Start the endpoint on its own listener (TLS), its connections bounded in number, handshake
    time and silence; the caller cleans it up on shutdown."""
    runner = web.AppRunner(endpoint.app(), access_log=None, keepalive_timeout=KEEPALIVE, handle_signals=False)
    await runner.setup()
    server = runner.server
    if server is None:  # setup() sets it
        raise RuntimeError("aiohttp's runner has no server after setup")
    listener = Listener(server, context, endpoint.host.metrics, max_connections=max_connections,
                        max_per_source=max_per_source)  # fmt: skip
    try:
        await listener.start(address, port)
    except BaseException:
        await runner.cleanup()
        raise
    return PushServer(runner, listener)
