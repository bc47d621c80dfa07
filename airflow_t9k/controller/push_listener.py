"""The progress endpoint's listener: every pod can reach it, so what a connection may cost is bounded
before any byte of TLS is read (docs/progress.md, "Floods").

aiohttp's ``TCPSite`` accepts without limit and gives a TLS handshake Python's 60 s; measured,
4,000 connections that never send a byte grew the controller from 58 to 265 MB, and a TLS
connection holds about 300 KB (asyncio's 256 KiB read buffer) for as long as it is open. Here the
accept loop is ours:

- at most ``max_connections`` open at once, and ``max_per_source`` from one address (a pod has
  one; a node's SNAT puts several behind one): beyond either, a connection is closed as soon as
  it is accepted, before its handshake, so it costs a file descriptor for a moment and nothing
  else;
- the handshake gets ``handshake_timeout`` seconds (5 by default);
- a connection that sends nothing for ``idle_timeout`` seconds is closed (aiohttp's keep-alive
  closes idle ones between requests too, but not one that never sent its first).

The memory the endpoint can hold is therefore about ``max_connections`` times 300 KB (77 MB at the
default 256) whatever a flood does: the reconciler beside it keeps its share of the container's
limit (``tests/security/test_push_flood.py`` measures it).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto as sslproto
import contextlib
import logging
import socket
import ssl
import struct
from collections import Counter
from collections.abc import Callable
from typing import Any

from airflow_t9k.controller.push_auth import address

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 256
MAX_PER_SOURCE = 32
HANDSHAKE_TIMEOUT = 5.0
IDLE_TIMEOUT = 15.0


def source_of(peer: Any) -> str:
    """The peer's address as one key, normalized as the push path's source check compares
    addresses (``push_auth.address``: an IPv4-mapped IPv6 address is its IPv4 address)."""
    host = str(peer[0] if isinstance(peer, tuple) else peer)
    ip = address(host)
    return host if ip is None else str(ip)


class Admission:
    """How many connections are open, in all and by source; pure (the listener does the I/O)."""

    def __init__(self, max_connections: int, max_per_source: int) -> None:
        self.max_connections, self.max_per_source = max_connections, max_per_source
        self.open = 0
        self.by_source: Counter[str] = Counter()

    def admit(self, source: str) -> str | None:
        """None when a connection from ``source`` may open (and it is counted), else why not."""
        if self.open >= self.max_connections:
            return "connections"
        if self.by_source[source] >= self.max_per_source:
            return "per-source"
        self.open += 1
        self.by_source[source] += 1
        return None

    def release(self, source: str) -> None:
        self.open -= 1
        self.by_source[source] -= 1
        if self.by_source[source] <= 0:
            del self.by_source[source]


class _Tracked(asyncio.Protocol):
    """aiohttp's request handler behind a thin protocol that notices the connection's end (to
    release its place) and its silence (to close it)."""

    def __init__(self, inner: asyncio.Protocol, done: Callable[[], None], idle_timeout: float) -> None:
        self.inner, self.done, self.idle_timeout = inner, done, idle_timeout
        self.transport: asyncio.BaseTransport | None = None
        self.timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(self.idle_timeout, self._idle)

    def _idle(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._arm()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._arm()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        try:
            self.inner.connection_lost(exc)
        finally:
            self.done()


class _SmallBufferTLS(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a read buffer of one TLS record (16 KiB of plaintext at most,
    plus its overhead) instead of 256 KiB: that buffer is allocated per connection, at accept, and
    was most of the 300 KB a connection cost."""

    max_size = 20 * 1024


class Listener:
    """Accepts on ``sock`` and serves each admitted connection with ``factory()``'s protocol over
    TLS; ``counts`` (the controller's metrics) hears of every refusal and failed handshake."""

    def __init__(self, factory: Callable[[], Any], context: ssl.SSLContext, counts: Counter[str], *,
                 max_connections: int = MAX_CONNECTIONS, max_per_source: int = MAX_PER_SOURCE,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT, idle_timeout: float = IDLE_TIMEOUT) -> None:  # fmt: skip
        self.factory, self.context, self.counts = factory, context, counts
        self.admission = Admission(max_connections, max_per_source)
        self.handshake_timeout, self.idle_timeout = handshake_timeout, idle_timeout
        self.sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()

    async def start(self, address: str, port: int, backlog: int = 4096) -> None:
        # A deep accept queue (the kernel's, not this process's memory; capped by somaxconn): a
        # burst the loop takes a moment to accept is accepted and refused at once, instead of
        # overflowing and reaching it half a minute later through the clients' SYN retries.
        infos = await asyncio.get_running_loop().getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, where = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(where)
            sock.listen(backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.sock = sock
        self._accepting = asyncio.create_task(self._accept_loop(sock))

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:  # EMFILE, ENFILE, ECONNABORTED: the next accept may work
                self.counts["progress_push_accept_error"] += 1
                log.warning("progress endpoint: accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            source = source_of(peer)
            refused = self.admission.admit(source)
            if refused is not None:
                self.counts[f"progress_push_connection_refused_{refused.replace('-', '_')}"] += 1
                with contextlib.suppress(OSError):  # a reset, not a FIN: nothing of it lingers here
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
                continue
            task = asyncio.create_task(self._serve(conn, source))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _serve(self, conn: socket.socket, source: str) -> None:
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.admission.release(source)

        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        waiter: asyncio.Future[None] = loop.create_future()
        # typeshed has the timeout an int; asyncio takes any number of seconds.
        tls = _SmallBufferTLS(loop, _Tracked(self.factory(), release, self.idle_timeout), self.context, waiter,
                              server_side=True, ssl_handshake_timeout=self.handshake_timeout)  # type: ignore[arg-type]  # fmt: skip
        try:
            await loop.connect_accepted_socket(lambda: tls, sock=conn)
            await waiter  # the handshake; SSLProtocol ends it at its timeout
        except asyncio.CancelledError:
            conn.close()
            release()
            raise
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError) as exc:
            # A handshake that timed out or failed: the protocol never saw the connection.
            self.counts["progress_push_handshake_failed"] += 1
            log.debug("progress endpoint: a TLS handshake from %s failed: %s", source, type(exc).__name__)
            conn.close()
            release()

    async def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        if self.sock is not None:
            self.sock.close()
        for task in list(self._handshakes):
            task.cancel()
        await asyncio.gather(*self._handshakes, return_exceptions=True)
        # The connections being served are aiohttp's to close (its runner's cleanup).
