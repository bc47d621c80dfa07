"""Followed pod logs as HTTP/2 streams, many of them over one TLS connection.

An HTTP/1.1 client holds a connection for each followed log, and most of what a followed log
cost the controller was that connection's TLS state: about 85 KB a stream at 100 running jobs
(docs/benchmarks.md, "Session 16"), where Kubeflow's operator follows none. The API server
speaks HTTP/2 (ALPN ``h2``) and multiplexes up to its per-connection stream limit (100 unless
``--http2-max-streams-per-connection`` says otherwise) over one connection, as client-go does;
a stream then costs a few KB. Only ``lines()`` (a streamed GET) goes this way: every other
request stays on the aiohttp transport.

Where HTTP/2 is not agreed (plain http, or a server or proxy that answers ALPN with HTTP/1.1),
``MultiplexedLines`` says so once in the log and hands every stream to the HTTP/1.1 client it
was given. Flow control bounds what is held per stream: the server sends at most the stream's
window (64 KB) past what the reader has taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode, urlsplit

from airflow_t9k import __version__
from airflow_t9k.k8s.client import LineSplitter, query_params
from airflow_t9k.k8s.errors import from_response

if TYPE_CHECKING:
    import h2.connection

    from airflow_t9k.k8s.kubeconfig import Endpoint

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
READ_SIZE = 1 << 16


class LineSource(Protocol):
    def lines(self, path: str, *, query: dict[str, Any], timeout: float | None = None,
              max_line: int = 1 << 16, log: bool = False, flush: bool = False) -> AsyncIterator[bytes]: ...  # fmt: skip


class StreamLost(ConnectionError):
    """The stream ended without its answer's end: reset, or its connection gone."""


class NoHTTP2(Exception):
    """The server did not agree to HTTP/2 on this endpoint."""


class _Stream:
    """What has arrived for one request and not yet been read."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.chunks: deque[bytes] = deque()
        self.ended = False
        self.error: BaseException | None = None
        self.wake = asyncio.Event()

    def fail(self, exc: BaseException) -> None:
        if not self.ended and self.error is None:
            self.error = exc
        self.wake.set()

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body, None at its end; raises what ended it otherwise."""
        while True:
            if self.chunks:
                return self.chunks.popleft()
            if self.ended:
                return None
            if self.error is not None:
                raise self.error
            self.wake.clear()
            await self.wake.wait()

    async def answered(self) -> int:
        while self.status is None:
            if self.error is not None:
                raise self.error
            if self.ended:
                raise StreamLost("the stream ended before its response headers")
            self.wake.clear()
            await self.wake.wait()
        return self.status


class _Connection:
    """One HTTP/2 connection: its streams, and the task that reads every frame of it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, h2conn: h2.connection.H2Connection,
                 on_closed: Callable[[_Connection], None]) -> None:  # fmt: skip
        self.reader, self.writer, self.h2 = reader, writer, h2conn
        self.streams: dict[int, _Stream] = {}
        self.closing = False  # no new stream on it: it is being closed, or it broke
        self.broken = False  # nothing more is read or sent (it ended, broke, or the server said GOAWAY)
        self._on_closed = on_closed
        self.task = asyncio.get_running_loop().create_task(self._read())

    def has_room(self) -> bool:
        return not self.closing and self.h2.open_outbound_streams < self.h2.remote_settings.max_concurrent_streams

    def open(self, headers: list[tuple[str, str]]) -> tuple[int, _Stream]:
        sid = self.h2.get_next_available_stream_id()
        self.h2.send_headers(sid, headers, end_stream=True)
        stream = self.streams[sid] = _Stream()
        self._flush()
        return sid, stream

    def consumed(self, sid: int, size: int) -> None:
        """The reader took ``size`` bytes of the stream: the server may send as many more."""
        if not self.broken and size:
            self.h2.acknowledge_received_data(size, sid)
            self._flush()

    def finish(self, sid: int) -> None:
        """The reader is done with the stream: cancelled at the server if it still runs."""
        stream = self.streams.pop(sid, None)
        if stream is not None and not self.broken and not stream.ended:
            import h2.errors
            import h2.exceptions

            with contextlib.suppress(h2.exceptions.StreamClosedError):
                self.h2.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                self._flush()

    def _flush(self) -> None:
        data = self.h2.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)

    async def _read(self) -> None:
        import h2.exceptions

        why: BaseException = StreamLost("the API server closed the connection")
        try:
            while True:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    break
                for event in self.h2.receive_data(data):
                    self._on(event)
                self._flush()
        except asyncio.CancelledError:
            why = StreamLost("the connection was closed")
            raise
        except StreamLost as exc:
            why = exc
        except (OSError, h2.exceptions.ProtocolError) as exc:
            why = StreamLost(f"the connection broke: {exc}")
        finally:
            self.closing = self.broken = True
            for stream in self.streams.values():
                stream.fail(why)
            self.streams.clear()
            self.writer.close()
            self._on_closed(self)

    def _on(self, event: Any) -> None:
        import h2.events

        stream = self.streams.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.ResponseReceived) and stream is not None:
            # str with header_encoding set, as here; h2's annotations say bytes
            status = next((v for k, v in event.headers or () if k in (":status", b":status")), "0")
            stream.status = int(status)
            stream.wake.set()
        elif isinstance(event, h2.events.DataReceived) and stream is not None:
            if event.data:
                stream.chunks.append(event.data)
            # Padding counts against the window but reaches no reader: given back at once.
            self.consumed(event.stream_id, event.flow_controlled_length - len(event.data))
            stream.wake.set()
        elif isinstance(event, h2.events.StreamEnded) and stream is not None:
            stream.ended = True
            stream.wake.set()
            self.streams.pop(event.stream_id, None)
        elif isinstance(event, h2.events.StreamReset) and stream is not None:
            stream.fail(StreamLost(f"the API server reset the stream ({event.error_code!r})"))
            self.streams.pop(event.stream_id, None)
        elif isinstance(event, h2.events.ConnectionTerminated):
            # GOAWAY (a server shutting down, or --goaway-chance spreading clients over servers):
            # h2 sends nothing more on the connection, window updates included, so its streams
            # end here and open again on a new connection, from their last line.
            raise StreamLost(f"the API server is going away ({event.error_code!r})")
        # Settings, pings and window updates are answered by h2 itself (flushed by the caller).

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task


class MultiplexedLines:
    """``lines()`` as the Kube client has it, over HTTP/2 connections to one endpoint.

    ``fallback`` serves every stream when the endpoint is not https or the server does not agree
    to HTTP/2; ``on_response`` (the status, or ``<error>``) counts requests as the controller's
    instrumented client does."""

    def __init__(self, endpoint: Endpoint, fallback: LineSource,
                 on_response: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.endpoint = endpoint
        self.fallback = fallback
        self.on_response = on_response
        url = urlsplit(endpoint.server)
        self._host, self._port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
        self._authority, self._prefix = url.netloc, url.path.rstrip("/")
        self.http2: bool | None = None if url.scheme == "https" else False  # None: not known yet
        self._conns: list[_Connection] = []
        self._lock: asyncio.Lock | None = None
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def connections(self) -> int:
        return len(self._conns)

    async def lines(self, path: str, *, query: dict[str, Any], timeout: float | None = None,
                    max_line: int = 1 << 16, log: bool = False, flush: bool = False) -> AsyncIterator[bytes]:  # fmt: skip
        """The lines of a streamed answer as they arrive, until it ends or ``timeout`` seconds
        have passed (then TimeoutError); a line longer than ``max_line`` bytes is cut there.
        ``log`` and ``flush`` as ``Kube.lines`` takes them."""
        conn = None if self.http2 is False else await self._connection()
        if conn is None:
            how = {"log": log, "flush": flush} if log or flush else {}  # a plain stream asks what it always did
            async for line in self.fallback.lines(path, query=query, timeout=timeout, max_line=max_line, **how):
                yield line
            return
        params = query_params(query)
        target = self._prefix + path + ("?" + urlencode(params) if params else "")
        headers = [(":method", "GET"), (":scheme", "https"), (":authority", self._authority), (":path", target),
                   ("user-agent", f"airflow-t9k/{__version__}"), ("accept", "*/*")]  # fmt: skip
        headers += [(k.lower(), v) for k, v in self.endpoint.headers().items()]
        sid, stream = conn.open(headers)
        expiry = (asyncio.get_running_loop().call_later(timeout, stream.fail, TimeoutError(f"no end after {timeout}s"))
                  if timeout is not None else None)  # fmt: skip
        try:
            try:
                status = await stream.answered()
            except Exception:
                self._count("<error>")
                raise
            self._count(str(status))
            if not 200 <= status <= 299:
                body = b""
                while (chunk := await stream.next_chunk()) is not None and len(body) < 1 << 20:
                    body += chunk
                    conn.consumed(sid, len(chunk))
                raise from_response(status, body.decode("utf-8", errors="replace"))
            splitter = LineSplitter(max_line, log=log)
            while (chunk := await stream.next_chunk()) is not None:
                conn.consumed(sid, len(chunk))
                for line in splitter.feed(chunk):
                    yield line
            if flush:
                for line in splitter.flush():
                    yield line
        finally:
            if expiry is not None:
                expiry.cancel()
            conn.finish(sid)
            self._drop_idle(conn)

    def _count(self, status: str) -> None:
        if self.on_response is not None:
            self.on_response(status)

    async def _connection(self) -> _Connection | None:
        """A connection with room for one more stream (a new one when none has), or None when
        the endpoint turned out not to speak HTTP/2."""
        if self._lock is None:
            self._lock = asyncio.Lock()  # made in the running loop
        async with self._lock:
            for conn in self._conns:
                if conn.has_room():
                    return conn
            if self.http2 is False:
                return None
            try:
                conn = await self._connect()
            except NoHTTP2 as exc:
                log.info("replica logs are followed over HTTP/1.1, a connection each: %s", exc)
                self.http2 = False
                return None
            self.http2 = True
            self._conns.append(conn)
            log.info("replica logs: an HTTP/2 connection opened, up to %d streams on it (%d open now)",
                     conn.h2.remote_settings.max_concurrent_streams, len(self._conns))  # fmt: skip
            return conn

    async def _connect(self) -> _Connection:
        import h2.config
        import h2.connection

        ctx = self.endpoint.ssl_context()
        if ctx is None:
            raise NoHTTP2("not https")
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self._host, self._port, ssl=ctx, server_hostname=self.endpoint.tls_server_name or None),
            CONNECT_TIMEOUT,
        )  # fmt: skip
        agreed = writer.get_extra_info("ssl_object").selected_alpn_protocol()
        if agreed != "h2":
            writer.close()
            raise NoHTTP2(f"the server chose {agreed or 'no protocol'} over h2")
        h2conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        h2conn.initiate_connection()
        writer.write(h2conn.data_to_send())
        try:  # the server's settings first: its stream limit decides when a second connection opens
            await asyncio.wait_for(self._settings(reader, writer, h2conn), CONNECT_TIMEOUT)
        except BaseException:
            writer.close()
            raise
        return _Connection(reader, writer, h2conn, self._closed)

    @staticmethod
    async def _settings(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        h2conn: h2.connection.H2Connection) -> None:  # fmt: skip
        import h2.events

        while True:
            data = await reader.read(READ_SIZE)
            if not data:
                raise StreamLost("the API server closed the connection before its settings")
            events = h2conn.receive_data(data)
            writer.write(h2conn.data_to_send())
            if any(isinstance(e, h2.events.RemoteSettingsChanged) for e in events):
                return

    def _closed(self, conn: _Connection) -> None:
        with contextlib.suppress(ValueError):
            self._conns.remove(conn)

    def _drop_idle(self, conn: _Connection) -> None:
        """A connection left without streams closes when another has room: one idle at most."""
        if conn.streams or conn.closing or not any(c is not conn and c.has_room() for c in self._conns):
            return
        self._closed(conn)
        conn.closing = True
        task = asyncio.get_running_loop().create_task(conn.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        conns, self._conns = self._conns, []
        await asyncio.gather(*(c.close() for c in conns), *self._closing)
