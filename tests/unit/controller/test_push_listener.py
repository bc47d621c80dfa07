"""The progress endpoint's listener (controller/push_listener.py): what a connection may cost,
bounded before any byte of TLS is read. The counting is a table; the listener itself runs here on
loopback with a real TLS handshake (no cluster: a flood against the deployed controller is
tests/security/test_push_flood.py)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import Counter

import aiohttp
import pytest
from aiohttp import web

from airflow_t9k.controller.push_listener import Admission, Listener, source_of
from airflow_t9k.controller.tls import self_signed


@pytest.mark.parametrize(
    ("address", "key"),
    [(("10.0.0.7", 51000), "10.0.0.7"),
     (("::ffff:10.0.0.7", 51000, 0, 0), "10.0.0.7"),  # IPv4-mapped: one source, whichever family accepted it
     (("fd00::7", 51000, 0, 0), "fd00::7"),
     (("fe80::1%eth0", 51000, 0, 2), "fe80::1"),
     ("not-an-address", "not-an-address")],
)  # fmt: skip
def test_a_source_is_its_address(address, key):
    assert source_of(address) == key


@pytest.mark.parametrize(
    ("steps", "refusals", "open_after"),
    [([("+", "a")] * 3, [None, None, "per-source"], 2),
     ([("+", "a"), ("+", "b"), ("+", "c"), ("+", "d")], [None, None, None, "connections"], 3),
     ([("+", "a"), ("+", "a"), ("-", "a"), ("+", "a")], [None, None, None], 2),  # a place given back is taken again
     ([("+", "a"), ("+", "b"), ("+", "c"), ("-", "b"), ("+", "d")], [None, None, None, None], 3)],
)  # fmt: skip
def test_admission_caps_in_all_and_by_source(steps, refusals, open_after):
    admission = Admission(max_connections=3, max_per_source=2)
    said = []
    for op, source in steps:
        if op == "+":
            said.append(admission.admit(source))
        else:
            admission.release(source)
    assert said == refusals
    assert admission.open == open_after == sum(admission.by_source.values())
    assert all(n > 0 for n in admission.by_source.values())  # released sources are forgotten


async def _serve(**limits):
    tls = self_signed(["127.0.0.1"])

    async def answer(request: web.Request) -> web.Response:
        return web.Response(text=f"{len(await request.read())} {request.remote}")

    app = web.Application(client_max_size=1 << 20)
    app.router.add_route("*", "/", answer)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    counts: Counter[str] = Counter()
    listener = Listener(runner.server, tls.context, counts, **limits)
    await listener.start("127.0.0.1", 0)
    port = listener.sock.getsockname()[1]  # type: ignore[union-attr]
    return tls, runner, listener, counts, port


@pytest.mark.asyncio
async def test_requests_are_served_and_silent_connections_closed_and_refused():
    tls, runner, listener, counts, port = await _serve(max_connections=8, max_per_source=4, handshake_timeout=0.5,
                                                       idle_timeout=0.5)  # fmt: skip
    context = ssl.create_default_context(cadata=tls.ca_pem)
    loop = asyncio.get_running_loop()
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
            for size in (0, 70000, 300000):  # bodies across several TLS records
                async with session.post(f"https://127.0.0.1:{port}/", data=b"x" * size) as r:
                    assert (r.status, await r.text()) == (200, f"{size} 127.0.0.1")
            # Its keep-alive connection is the one open; silent, it is closed by the idle timeout.
            assert listener.admission.open == 1
            await asyncio.sleep(1.0)
            assert listener.admission.open == 0

        # Silent connections: four from one address, then a fifth refused at once; all four closed by the handshake's timeout.
        silent = []
        for _ in range(5):
            s = socket.socket()
            s.setblocking(False)
            await loop.sock_connect(s, ("127.0.0.1", port))
            silent.append(s)
        await asyncio.sleep(0.2)
        assert counts["progress_push_connection_refused_per_source"] == 1
        assert listener.admission.open == 4
        await asyncio.sleep(0.8)
        assert listener.admission.open == 0
        assert counts["progress_push_handshake_failed"] == 4
        ends = []
        for s in silent:
            try:
                ends.append(await asyncio.wait_for(loop.sock_recv(s, 1), 1))  # b"": closed by the server
            except ConnectionResetError:
                ends.append("reset")  # the refused one: reset at accept, nothing lingers
            s.close()
        assert sorted(ends, key=str) == [b"", b"", b"", b"", "reset"]
    finally:
        await listener.close()
        await runner.cleanup()


@pytest.mark.asyncio
async def test_a_load_within_the_caps_is_served_whole():
    """The caps bound a flood, not the replicas' load: 200 replicas (40 addresses, 5 behind each,
    as behind a node's SNAT) pushing at once, each twice on its kept-alive connection, are all
    answered, none refused or cut."""
    tls, runner, listener, counts, port = await _serve(max_connections=256, max_per_source=32)
    context = ssl.create_default_context(cadata=tls.ca_pem)

    async def replica(i: int) -> list[int]:
        connector = aiohttp.TCPConnector(ssl=context, local_addr=(f"127.0.3.{1 + i % 40}", 0))
        async with aiohttp.ClientSession(connector=connector) as session:
            codes = []
            for _ in range(2):
                async with session.post(f"https://127.0.0.1:{port}/", data=b'{"step": 1}') as r:
                    await r.read()
                    codes.append(r.status)
            return codes

    try:
        answers = await asyncio.gather(*(replica(i) for i in range(200)))
    finally:
        await listener.close()
        await runner.cleanup()
    assert [c for codes in answers for c in codes] == [200] * 400
    assert not [k for k in counts if k.startswith("progress_push_connection_refused")], counts
    assert counts["progress_push_handshake_failed"] == 0


def test_a_certificate_made_at_start_needs_no_writable_directory(monkeypatch):
    """The chart's pods have a read-only root filesystem and no writable /tmp: --metrics-secure
    (and the push path without files) made its certificate through a temporary directory, and
    the deployed controller crashed at start (run 46). It is loaded from memory (memfd) now."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent-read-only")
    tls = self_signed(["airflow-t9k-controller-metrics"])
    assert tls.context.cert_store_stats() is not None
    assert "BEGIN CERTIFICATE" in tls.ca_pem
