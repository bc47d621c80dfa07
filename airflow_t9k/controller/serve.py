"""The controller's small HTTP server: liveness, readiness and Prometheus metrics.

/healthz and /livez answer 200 whenever the process and its event loop answer at all: an
API server outage is not a reason for the kubelet to restart the controller. /readyz is
200 once every cache has synced and every watch is open; it names the watches that are not.

/metrics has its own listener, on 127.0.0.1 by default: it names namespaces and jobs. With
``--metrics-secure`` (the chart's default) it is served over TLS to callers the API server
vouches for and allows ``get`` on the non-resource URL ``/metrics`` (``metrics_auth.py``), as
controller-runtime's secure metrics server does; then it may listen on every address. The probes
must be reachable by the kubelet on the pod's address. When both are given the same address and
port (and /metrics is not secure) they share one listener.

Plain asyncio, not aiohttp's web server: importing ``aiohttp.web`` costs the controller about
2 MB of memory for three GET routes (docs/benchmarks.md, session 16). One request per
connection (``Connection: close``), as kubelet probes and Prometheus both handle; a request
head must arrive whole within ``HEAD_TIMEOUT`` seconds and ``HEAD_LIMIT`` bytes, so a slow or
endless client cannot hold a connection open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from airflow_t9k.controller.metrics_auth import MetricsGuard
    from airflow_t9k.controller.runner import Controller

log = logging.getLogger(__name__)

HEAD_LIMIT = 8192
HEAD_TIMEOUT = 10.0
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    503: "Service Unavailable",
}
TEXT = "text/plain; charset=utf-8"

Route = Callable[[], tuple[int, str, bytes]]  # -> (status, content type, body)


def routes_for(controller: Controller, probes: bool = True, metrics: bool = True) -> dict[str, Route]:
    def live() -> tuple[int, str, bytes]:
        return 200, TEXT, b"ok\n"

    def ready() -> tuple[int, str, bytes]:
        failing = controller.unhealthy()
        if not failing:
            return 200, TEXT, b"ok\n"
        return 503, TEXT, ("not ready:\n" + "".join(f"  {f}\n" for f in failing)).encode()

    def prometheus() -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, generate_latest(controller.instruments.registry)

    routes: dict[str, Route] = {}
    if probes:
        routes.update({"/healthz": live, "/livez": live, "/readyz": ready})
    if metrics:
        routes["/metrics"] = prometheus
    return routes


def respond(routes: dict[str, Route], head: bytes) -> tuple[int, str, bytes, bool]:
    """(status, content type, body, whether to send the body) for a request head."""
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return 400, TEXT, b"bad request\n", True
    method, target = parts[0], parts[1].split(b"?", 1)[0].decode("latin-1")
    route = routes.get(target)
    if route is None:
        return 404, TEXT, b"not found\n", method != b"HEAD"
    if method not in (b"GET", b"HEAD"):
        return 405, TEXT, b"method not allowed\n", True
    return (*route(), method == b"GET")


def authorization(head: bytes) -> str | None:
    """The request head's ``Authorization`` header, if any."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            return value.strip().decode("latin-1")
    return None


class Listener:
    """One listening socket serving ``routes``; ``cleanup()`` stops it (as aiohttp's runner's).
    With ``guard``, every route answers only a caller the guard lets through (``--metrics-secure``)."""

    def __init__(
        self, routes: dict[str, Route], context: ssl.SSLContext | None = None, guard: MetricsGuard | None = None
    ) -> None:
        self.routes, self.context, self.guard = routes, context, guard
        self.server: asyncio.Server | None = None

    async def start(self, address: str, port: int) -> Listener:
        self.server = await asyncio.start_server(self._handle, address, port, limit=HEAD_LIMIT, ssl=self.context,
                                                 ssl_handshake_timeout=HEAD_TIMEOUT if self.context else None)  # fmt: skip
        return self

    @property
    def port(self) -> int:
        """The port it listens on (what port 0 was given)."""
        if self.server is None or not self.server.sockets:
            raise RuntimeError("not listening")
        return int(self.server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
                return
            refused = await self.guard.check(authorization(head)) if self.guard is not None else None
            if refused is not None:
                status, ctype, body, send = refused.code, TEXT, f"{refused.message}\n".encode(), True
            else:
                status, ctype, body, send = respond(self.routes, head)
            head_out = (f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {ctype}\r\n"
                        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")  # fmt: skip
            writer.write(head_out.encode() + (body if send else b""))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def cleanup(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def serve(controller: Controller, address: str, port: int, probes: bool = True, metrics: bool = True,
                secure: tuple[ssl.SSLContext, MetricsGuard] | None = None) -> Listener:  # fmt: skip
    """Start serving; the caller cleans the listener up on shutdown."""
    context, guard = secure if secure is not None else (None, None)
    listener = await Listener(routes_for(controller, probes=probes, metrics=metrics), context, guard).start(address, port)
    # Said once bound: whoever waits on the probes can tell this process answers, not another
    # that held the port first (this one then exits: address already in use).
    what = " and ".join(w for w, on in (("probes", probes), ("metrics", metrics)) if on)
    log.info("%s: listening on %s:%d", what, address, listener.port)
    return listener


async def serve_all(controller: Controller, health: tuple[str, int], metrics: tuple[str, int],
                    secure: tuple[ssl.SSLContext, MetricsGuard] | None = None) -> list[Listener]:  # fmt: skip
    """The probes and /metrics on their listeners (one when both name the same, unless /metrics is
    served securely; port 0: off). ``secure``: /metrics over TLS, for callers the guard admits."""
    if health == metrics and health[1] and secure is None:
        return [await serve(controller, *health)]
    listeners = []
    if health[1]:
        listeners.append(await serve(controller, *health, metrics=False))
    if metrics[1]:
        listeners.append(await serve(controller, *metrics, probes=False, secure=secure))
    return listeners
