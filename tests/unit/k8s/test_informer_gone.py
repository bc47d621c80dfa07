"""The informer's 410 path, against an HTTP-level fake API server (aiohttp on loopback)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from airflow_t9k.k8s.client import Kube
from airflow_t9k.k8s.informer import Informer

PATH = "/api/v1/namespaces/ns/configmaps"


@asynccontextmanager
async def fake_api(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> AsyncIterator[Kube]:
    """An aiohttp server on loopback answering PATH, and a Kube client pointed at it."""
    app = web.Application()
    app.router.add_get(PATH, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kube = Kube(k8s_client.ApiClient(k8s_client.Configuration(host=f"http://127.0.0.1:{port}")))
    try:
        yield kube
    finally:
        await kube.close()
        await runner.cleanup()


async def run_informer(informer: Informer, until: Callable[[], bool]) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    for _ in range(200):
        if until():
            break
        await asyncio.sleep(0.02)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def cm(name: str, rv: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class FakeServer:
    """First list: a, b. First watch: 410. Second list: b, c. Second watch: c deleted."""

    def __init__(self) -> None:
        self.lists = 0
        self.watches: list[str] = []
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            self.lists += 1
            items = [cm("a", "5"), cm("b", "6")] if self.lists == 1 else [cm("b", "6"), cm("c", "20")]
            return web.json_response({"metadata": {"resourceVersion": "10" if self.lists == 1 else "20"}, "items": items})
        self.watches.append(request.query["resourceVersion"])
        resp = web.StreamResponse()
        await resp.prepare(request)
        if len(self.watches) == 1:
            event = {
                "type": "ERROR",
                "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"},
            }
        else:
            event = {"type": "DELETED", "object": cm("c", "21")}
        await resp.write(json.dumps(event).encode() + b"\n")
        if len(self.watches) > 2:
            await self.release.wait()  # hold the stream open until the test ends
        return resp


@pytest.mark.asyncio
async def test_410_relists_and_drops_what_disappeared():
    fake = FakeServer()
    events: list[tuple[str, str]] = []
    async with fake_api(fake.handle) as kube:
        informer = Informer(kube, PATH, kind="ConfigMap", handler=lambda e, o: events.append((e, o["metadata"]["name"])))
        task = await run_informer(informer, lambda: len(fake.watches) >= 3)
        fake.release.set()
        await stop(task)
        assert fake.lists == 2
        assert informer.lists == 2
        assert fake.watches[:2] == ["10", "20"]  # the second watch starts from the relist
        assert sorted(n for _, n in informer.cache) == ["b"]
        assert ("DELETED", "a") in events  # gone while we were not watching
        assert ("ADDED", "c") in events
        assert ("DELETED", "c") in events
        assert fake.watches[2] == "21"  # resumes from the last event, without a third list


@pytest.mark.asyncio
async def test_a_failed_watch_is_unhealthy_only_until_the_next_one_opens():
    calls = {"watch": 0}
    release = asyncio.Event()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": []})
        calls["watch"] += 1
        if calls["watch"] == 1:
            return web.json_response({"kind": "Status", "code": 500, "message": "boom"}, status=500)
        resp = web.StreamResponse()
        await resp.prepare(request)
        await release.wait()  # an open, quiet watch: no event will come
        return resp

    async with fake_api(handle) as kube:
        informer = Informer(kube, PATH, kind="ConfigMap")
        task = await run_informer(informer, lambda: calls["watch"] >= 2 and informer.healthy)
        healthy = informer.healthy
        release.set()
        await stop(task)
    assert calls["watch"] == 2
    assert healthy
