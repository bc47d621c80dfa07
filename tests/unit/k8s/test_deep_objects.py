"""One object too deep to decode is left out; the list, the watch and the other objects go on.

Against an HTTP-level fake API server on loopback, which can serve what a real one would
refuse to store, including nesting beyond any decoder's reach.
"""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from aiohttp import web

from airflow_t9k.k8s.client import UNDECODABLE, Undecodable, decode, identify, list_metadata
from airflow_t9k.k8s.informer import Informer
from tests.unit.k8s.test_informer_gone import PATH, cm, fake_api, run_informer, stop

TOO_DEEP = 200_000  # beyond what the decoder is allowed (the API server itself stops at 10,000)


def deep(name: str, rv: str, depth: int) -> str:
    """A ConfigMap whose data nests ``depth`` levels, as raw JSON in the API server's key order."""
    meta = json.dumps({"name": name, "namespace": "ns", "resourceVersion": rv, "uid": f"uid-{name}"}, separators=(",", ":"))
    return '{"apiVersion":"v1","kind":"ConfigMap","metadata":' + meta + ',"spec":' + '{"a":' * depth + "1" + "}" * depth + "}"


@pytest.mark.parametrize("depth", [10, 3_000, 10_000])
def test_objects_as_deep_as_the_api_server_stores_decode(depth):
    limit = sys.getrecursionlimit()
    obj = decode(deep("x", "1", depth))
    assert obj["metadata"]["name"] == "x"
    assert sys.getrecursionlimit() == limit  # raised only while decoding


def test_deeper_objects_raise_with_what_could_be_read_of_them():
    with pytest.raises(Undecodable) as err:
        decode(deep("hostile", "7", TOO_DEEP))
    assert err.value.identity == {"kind": "ConfigMap", "name": "hostile", "namespace": "ns", "uid": "uid-hostile"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"kind":"PodList","items":[],"metadata":{"continue":"abc","resourceVersion":"9"}}',
         {"continue": "abc", "resourceVersion": "9"}),
        ('{"kind":"PodList","items":[],"metadata":{"resourceVersion":"9"}}\n', {"resourceVersion": "9"}),
        ('{"kind":"PodList","items":[]}', {}),
    ],
)  # fmt: skip
def test_list_metadata_is_read_from_the_end(raw, expected):
    assert list_metadata(raw) == expected


def test_identify_reads_the_first_object_only():
    raw = (
        '{"type":"ADDED","object":{"apiVersion":"v1","kind":"GenericJob",'
        '"metadata":{"name":"a","namespace":"n","uid":"u"},"spec":{"name":"b"}}}'
    )
    assert identify(raw) == {"kind": "GenericJob", "name": "a", "namespace": "n", "uid": "u"}


@pytest.mark.asyncio
async def test_list_leaves_out_the_deep_item_and_keeps_the_rest():
    """Page of 3 with a bad middle item: refetched one by one, the bad one skipped."""
    items = [json.dumps(cm("a", "5")), deep("bad", "6", TOO_DEEP), json.dumps(cm("c", "7"))]
    watches: list[str] = []
    release = asyncio.Event()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            watches.append(request.query["resourceVersion"])
            resp = web.StreamResponse()
            await resp.prepare(request)
            await release.wait()
            return resp
        limit = int(request.query.get("limit", "500"))
        start = int(request.query.get("continue") or 0)
        page = items[start : start + limit]
        meta = {"resourceVersion": "10"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        body = '{"apiVersion":"v1","items":[' + ",".join(page) + '],"kind":"ConfigMapList","metadata":' + json.dumps(meta) + "}"
        return web.Response(text=body, content_type="application/json")

    events: list[tuple[str, str]] = []
    async with fake_api(handle) as kube:
        informer = Informer(kube, PATH, kind="ConfigMap", handler=lambda e, o: events.append((e, o["metadata"]["name"])))
        task = await run_informer(informer, lambda: bool(watches))
        release.set()
        await stop(task)
    assert sorted(n for _, n in informer.cache) == ["a", "c"]
    assert informer.synced.is_set()
    assert watches == ["10"]
    assert (UNDECODABLE, "bad") in events


@pytest.mark.asyncio
async def test_watch_skips_the_deep_event_and_keeps_watching():
    release = asyncio.Event()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": []})
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b'{"type":"ADDED","object":' + deep("bad", "2", TOO_DEEP).encode() + b"}\n")
        await resp.write(json.dumps({"type": "ADDED", "object": cm("good", "3")}).encode() + b"\n")
        await release.wait()
        return resp

    events: list[tuple[str, str]] = []
    async with fake_api(handle) as kube:
        informer = Informer(kube, PATH, kind="ConfigMap", handler=lambda e, o: events.append((e, o["metadata"]["name"])))
        task = await run_informer(informer, lambda: ("ADDED", "good") in events)
        healthy = informer.healthy
        release.set()
        await stop(task)
    assert events == [(UNDECODABLE, "bad"), ("ADDED", "good")]
    assert list(informer.cache) == [("ns", "good")]
    assert healthy
    assert informer.resource_version == "3"
