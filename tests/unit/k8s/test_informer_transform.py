"""The informer's transform: every object it caches or hands to a handler went through it
(list items, watch events, ``store``), against an HTTP-level fake API server."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from airflow_t9k.controller.slim import drop_managed_fields
from airflow_t9k.k8s.informer import Informer
from tests.unit.k8s.test_informer_gone import fake_api, run_informer, stop

MANAGED = [{"manager": "kwok", "operation": "Update", "fieldsV1": {"f:data": {}}}]


def cm(name: str, rv: str, **data: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "managedFields": MANAGED},
            "data": data, "binaryData": {"blob": "AAAA" * 100}, "immutable": False}  # fmt: skip


def slimmed(name: str, rv: str, **data: str) -> dict:
    """What slim_for("ConfigMap") keeps of ``cm(...)``: list items come without a kind, the informer adds it."""
    return {"kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "data": data}


class Server:
    """List: a, b. Watch: c added, a modified, b deleted, a bookmark, then an object the
    transform chokes on; then the stream stays open."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "10"}, "items": [cm("a", "5", k="1"), cm("b", "6")]})
        resp = web.StreamResponse()
        await resp.prepare(request)
        events = [
            {"type": "ADDED", "object": {"kind": "ConfigMap", **cm("c", "11", k="3")}},
            {"type": "MODIFIED", "object": {"kind": "ConfigMap", **cm("a", "12", k="2")}},
            {"type": "DELETED", "object": {"kind": "ConfigMap", **cm("b", "13")}},
            {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": "14"}}},
            {"type": "ADDED", "object": {"kind": "ConfigMap", "metadata": {"name": "odd", "namespace": "ns",
                                                                            "resourceVersion": "15"}, "data": "boom"}},
        ]  # fmt: skip
        for event in events:
            await resp.write(json.dumps(event).encode() + b"\n")
        await self.release.wait()
        return resp


def test_list_watch_and_store_all_pass_through_the_transform():
    seen: list[tuple[str, dict]] = []
    calls: list[str] = []

    def slim(obj: dict) -> dict:  # a hostfile's slim (controller/slim.py): metadata and data
        return drop_managed_fields({k: obj[k] for k in ("apiVersion", "kind", "metadata", "data") if k in obj})

    def transform(obj: dict) -> dict:
        calls.append(obj["metadata"]["name"])
        if obj.get("data") == "boom":
            raise ValueError("a transform bug")
        return slim(obj)

    async def go() -> Informer:
        server = Server()
        async with fake_api(server.handle) as kube:
            informer = Informer(kube, "/api/v1/namespaces/ns/configmaps", kind="ConfigMap", transform=transform,
                                handler=lambda e, o: seen.append((e, o)))  # fmt: skip
            task = await run_informer(informer, lambda: ("ns", "odd") in informer.cache)
            server.release.set()
            await stop(task)
            informer.store({"kind": "ConfigMap", **cm("d", "30", k="4")})  # what the executor stores after a write
            return informer

    informer = asyncio.run(go())
    assert informer.cache == {
        ("ns", "a"): slimmed("a", "12", k="2"),
        ("ns", "c"): slimmed("c", "11", k="3"),
        ("ns", "d"): slimmed("d", "30", k="4"),
        # The transform failed: the object is kept whole (nothing lost) and the watch went on.
        ("ns", "odd"): {"kind": "ConfigMap", "metadata": {"name": "odd", "namespace": "ns", "resourceVersion": "15"},
                        "data": "boom"},
    }  # fmt: skip
    assert seen[:5] == [
        ("ADDED", slimmed("a", "5", k="1")), ("ADDED", slimmed("b", "6")),  # the list
        ("ADDED", slimmed("c", "11", k="3")), ("MODIFIED", slimmed("a", "12", k="2")), ("DELETED", slimmed("b", "13")),
    ]  # fmt: skip
    assert [e for e, _ in seen] == ["ADDED"] * 3 + ["MODIFIED", "DELETED", "ADDED"]  # no handler call for the bookmark
    assert calls == ["a", "b", "c", "a", "b", "odd", "d"]  # once per object: never twice, never for a bookmark
    assert informer.resource_version == "15"


def test_without_a_transform_objects_are_cached_as_served():
    async def go() -> Informer:
        server = Server()
        async with fake_api(server.handle) as kube:
            informer = Informer(kube, "/api/v1/namespaces/ns/configmaps", kind="ConfigMap")
            task = await run_informer(informer, lambda: ("ns", "odd") in informer.cache)
            server.release.set()
            await stop(task)
            return informer

    informer = asyncio.run(go())
    assert informer.cache[("ns", "a")] == {"kind": "ConfigMap", **cm("a", "12", k="2")}
