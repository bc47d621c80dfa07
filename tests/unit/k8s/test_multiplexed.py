"""Followed logs over HTTP/2 (airflow_t9k/k8s/multiplexed.py) against a loopback HTTP/2 server
over TLS, built on h2 as the API server's own is on Go's: streams sharing a connection, a second
connection past the server's stream limit, flow control, error statuses, resets, a lost
connection, timeouts and early readers cancelled at the server, and the fallback to HTTP/1.1."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import pytest
import yaml

from airflow_t9k.k8s.errors import Forbidden, NotFound
from airflow_t9k.k8s.kubeconfig import load
from airflow_t9k.k8s.multiplexed import MultiplexedLines, StreamLost
from tests.unit.k8s.test_transport import pki  # noqa: F401 - its CA, and a certificate for kube.test

SECRET = "s3cr3t-t0ken-value"


@dataclass
class Request:
    conn: int
    stream: int
    headers: dict[str, str]
    reset: int | None = None  # the error code of the client's RST_STREAM, if it sent one


@dataclass
class Server:
    """Answers by path: /lines?count=&size= (that many lines, then the end), /hold (one line,
    then nothing, until the client goes), /missing (404), /forbidden (403), /reset (headers,
    then RST_STREAM), /goaway (headers, then GOAWAY for the whole connection)."""

    max_streams: int = 100
    alpn: tuple[str, ...] = ("h2",)
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.writers.append(writer)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        # In the first SETTINGS frame, as Go's server sends its limit.
        conn.local_settings = h2.settings.Settings(
            client=False, initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams}
        )
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        window = asyncio.Event()
        mine: dict[int, Request] = {}
        senders: set[asyncio.Task[None]] = set()
        try:
            while data := await reader.read(65536):
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        req = mine[ev.stream_id] = Request(number, ev.stream_id, dict(ev.headers))
                        self.requests.append(req)
                        task = asyncio.create_task(self._answer(conn, writer, req, window))
                        senders.add(task)
                        task.add_done_callback(senders.discard)
                    elif isinstance(ev, h2.events.StreamReset) and ev.stream_id in mine:
                        mine[ev.stream_id].reset = ev.error_code
                    elif isinstance(ev, h2.events.WindowUpdated):
                        window.set()
                writer.write(conn.data_to_send())
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            for task in senders:
                task.cancel()
            writer.close()

    async def _answer(self, conn: h2.connection.H2Connection, writer: asyncio.StreamWriter, req: Request,
                      window: asyncio.Event) -> None:  # fmt: skip
        url = urlsplit(req.headers[":path"])
        path, query = url.path.removeprefix("/prefix"), parse_qs(url.query)  # the kubeconfig's server has a path
        sid = req.stream
        status = {"/missing": 404, "/forbidden": 403}.get(path, 200)
        conn.send_headers(sid, [(":status", str(status)), ("content-type", "text/plain")])
        if status != 200:
            body = f'{{"kind":"Status","code":{status},"message":"no {path[1:]}"}}'.encode()
            conn.send_data(sid, body, end_stream=True)
        elif path == "/goaway":
            conn.close_connection()
        elif path == "/reset":
            conn.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
        elif path.startswith("/hold"):
            conn.send_data(sid, b"first line\n")
        else:
            count, size = int(query["count"][0]), int(query["size"][0])
            for i in range(count):
                line = f"{i:08d}".ljust(size - 1, "x").encode() + b"\n"
                while conn.local_flow_control_window(sid) < len(line):  # the client's window: wait for room
                    writer.write(conn.data_to_send())
                    window.clear()
                    await window.wait()
                conn.send_data(sid, line)
            conn.end_stream(sid)
        writer.write(conn.data_to_send())

    def drop_all(self) -> None:
        for w in self.writers:
            w.transport.abort()


@contextlib.asynccontextmanager
async def running(server: Server, pki: dict[str, Any], tmp_path: Path, scheme: str = "https") -> AsyncIterator[Any]:
    ctx = None
    if scheme == "https":
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(pki["dir"] / "srv.crt", pki["dir"] / "srv.key")
        ctx.set_alpn_protocols(list(server.alpn))
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=ctx)
    port = srv.sockets[0].getsockname()[1]
    cluster: dict[str, Any] = {"server": f"{scheme}://127.0.0.1:{port}/prefix"}
    if scheme == "https":
        cluster.update({"certificate-authority-data": base64.b64encode(pki["ca"]).decode(), "tls-server-name": "kube.test"})
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c", "clusters": [{"name": "k", "cluster": cluster}],
           "users": [{"name": "u", "user": {"token": SECRET} if scheme == "https" else {}}],
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    try:
        yield load(str(path))
    finally:
        srv.close()
        server.drop_all()


class Fallback:
    """The HTTP/1.1 client's ``lines``, as far as these tests need: what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def lines(self, path: str, *, query: dict[str, Any], timeout: float | None = None,
                    max_line: int = 1 << 16) -> AsyncIterator[bytes]:  # fmt: skip
        self.asked.append(path)
        yield b"over http/1.1"


async def first_line(lines: MultiplexedLines, path: str, **query: Any) -> tuple[bytes, AsyncIterator[bytes]]:
    it = lines.lines(path, query=query)
    return await it.__anext__(), it


@pytest.mark.asyncio
async def test_streams_share_one_connection_and_carry_the_token_path_and_query(pki, tmp_path):
    server, counted = Server(), []
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback(), on_response=counted.append)
        opened = [await first_line(lines, f"/hold/{i}", follow=True, container="main", sinceTime=None) for i in range(3)]
        assert [line for line, _ in opened] == [b"first line"] * 3
        assert server.connections == 1
        assert lines.connections == 1
        assert lines.http2 is True
        for req in server.requests:
            assert req.headers["authorization"] == f"Bearer {SECRET}"
            assert req.headers["user-agent"].startswith("airflow-t9k/")
        assert [r.headers[":path"] for r in server.requests] == [f"/prefix/hold/{i}?follow=true&container=main" for i in range(3)]
        assert counted == ["200"] * 3
        for _, it in opened:
            await it.aclose()  # type: ignore[attr-defined]
        await lines.close()


@pytest.mark.asyncio
async def test_past_the_servers_stream_limit_another_connection_opens_and_an_idle_one_closes(pki, tmp_path):
    server = Server(max_streams=2)
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback())
        opened = [await first_line(lines, "/hold") for _ in range(5)]
        assert server.connections == 3
        assert sorted({r.conn for r in server.requests}) == [1, 2, 3]
        for _, it in opened:
            await it.aclose()  # type: ignore[attr-defined]
        assert lines.connections == 1  # the emptied connections close while another has room
        assert (await first_line(lines, "/lines", count=1, size=10))[0] == b"00000000x"
        assert server.connections == 3  # and the one kept serves the next stream
        await lines.close()


@pytest.mark.asyncio
async def test_an_answer_many_windows_long_arrives_whole_and_in_order(pki, tmp_path):
    server = Server()
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback())
        got = [line async for line in lines.lines("/lines", query={"count": 5000, "size": 100})]  # 500 KB, windows of 64 KB
        assert len(got) == 5000
        assert [int(line[:8]) for line in got] == list(range(5000))
        assert {len(line) for line in got} == {99}
        await lines.close()


@pytest.mark.asyncio
async def test_a_line_past_max_line_is_cut(pki, tmp_path):
    server = Server()
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback())
        got = [line async for line in lines.lines("/lines", query={"count": 2, "size": 300}, max_line=64)]
        assert [len(line) for line in got] == [64, 64]
        await lines.close()


@pytest.mark.parametrize(("path", "error", "status"), [("/missing", NotFound, "404"), ("/forbidden", Forbidden, "403")])
@pytest.mark.asyncio
async def test_an_error_status_raises_the_error_it_names(pki, tmp_path, path, error, status):
    server, counted = Server(), []
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback(), on_response=counted.append)
        with pytest.raises(error, match=f"no {path[1:]}"):
            await first_line(lines, path)
        assert counted == [status]
        await lines.close()


@pytest.mark.asyncio
async def test_a_reset_stream_fails_alone(pki, tmp_path):
    server = Server()
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback())
        _, held = await first_line(lines, "/hold")
        with pytest.raises(StreamLost, match="reset"):
            [line async for line in lines.lines("/reset", query={})]
        got = [line async for line in lines.lines("/lines", query={"count": 3, "size": 10})]
        assert len(got) == 3
        assert server.connections == 1
        await held.aclose()  # type: ignore[attr-defined]
        await lines.close()


@pytest.mark.asyncio
async def test_a_lost_connection_fails_its_streams_and_the_next_stream_connects_again(pki, tmp_path):
    server = Server()
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback())
        _, held = await first_line(lines, "/hold")
        server.drop_all()
        with pytest.raises(StreamLost):
            await asyncio.wait_for(held.__anext__(), 5)
        assert lines.connections == 0
        assert (await first_line(lines, "/lines", count=1, size=10))[0] == b"00000000x"
        assert server.connections == 2
        await lines.close()


@pytest.mark.asyncio
async def test_a_goaway_ends_the_connections_streams_and_the_next_stream_connects_again(pki, tmp_path):
    server = Server()
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback())
        _, held = await first_line(lines, "/hold")
        with pytest.raises(StreamLost, match="going away"):
            [line async for line in lines.lines("/goaway", query={})]
        with pytest.raises(StreamLost, match="going away"):
            await asyncio.wait_for(held.__anext__(), 5)
        assert (await first_line(lines, "/lines", count=1, size=10))[0] == b"00000000x"
        assert server.connections == 2
        assert lines.connections == 1
        await lines.close()


@pytest.mark.asyncio
async def test_a_timeout_ends_the_stream_and_cancels_it_at_the_server(pki, tmp_path):
    server = Server()
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback())
        it = lines.lines("/hold", query={}, timeout=0.3)
        assert await it.__anext__() == b"first line"
        with pytest.raises(TimeoutError):
            await it.__anext__()
        await asyncio.sleep(0.2)
        assert [r.reset for r in server.requests] == [h2.errors.ErrorCodes.CANCEL]
        await lines.close()


@pytest.mark.asyncio
async def test_a_reader_that_stops_early_cancels_the_stream_at_the_server(pki, tmp_path):
    server = Server()
    async with running(server, pki, tmp_path) as endpoint:
        lines = MultiplexedLines(endpoint, Fallback())
        async for _line in lines.lines("/hold", query={}):
            break
        await asyncio.sleep(0.2)
        assert [r.reset for r in server.requests] == [h2.errors.ErrorCodes.CANCEL]
        # An answer read to its end needs no cancel.
        [line async for line in lines.lines("/lines", query={"count": 2, "size": 10})]
        await asyncio.sleep(0.2)
        assert [r.reset for r in server.requests] == [h2.errors.ErrorCodes.CANCEL, None]
        await lines.close()


@pytest.mark.parametrize("scheme", ["https", "http"])
@pytest.mark.asyncio
async def test_without_http2_every_stream_goes_to_the_fallback(pki, tmp_path, scheme):
    server, fallback = Server(alpn=("http/1.1",)), Fallback()
    async with running(server, pki, tmp_path, scheme) as endpoint:
        lines = MultiplexedLines(endpoint, fallback)
        for _ in range(2):
            assert [line async for line in lines.lines("/x", query={})] == [b"over http/1.1"]
        assert fallback.asked == ["/x", "/x"]
        assert lines.http2 is False
        # Asked once over TLS (the handshake said http/1.1), never again; plain http never.
        assert server.connections == (1 if scheme == "https" else 0)
        assert server.requests == []
        await lines.close()
