"""The informer's ``keep``: objects carrying our label but owned by no job of ours stay out of
the cache (a tenant's large ConfigMaps must not grow the controller), against an HTTP-level
fake API server; and the runner's ownership predicate, as a table."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from airflow_t9k.k8s.informer import Informer
from tests.unit.k8s.test_informer_gone import fake_api, run_informer, stop

OURS = [{"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "MPIJob", "name": "j", "uid": "u1", "controller": True}]
BIG = "x" * 1_000_000  # a 1 MB ConfigMap, as a tenant could create any number of


def cm(name: str, rv: str, owners: list | None = None, data: str = "") -> dict:
    meta = {"name": name, "namespace": "ns", "resourceVersion": rv, "labels": {"app.kubernetes.io/managed-by": "airflow-t9k"}}
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"kind": "ConfigMap", "metadata": meta, "data": {"d": data}}


class Server:
    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "10"},
                                      "items": [cm("hostfile", "5", OURS), cm("planted", "6", None, BIG)]})  # fmt: skip
        resp = web.StreamResponse()
        await resp.prepare(request)
        for etype, obj in [("ADDED", cm("planted-2", "11", None, BIG)),
                           ("ADDED", cm("other", "12", OURS, "y")),
                           ("MODIFIED", cm("other", "13", [], "y")),  # its owner reference removed: ours no more
                           ("ADDED", cm("last", "14", OURS))]:  # fmt: skip
            await resp.write(json.dumps({"type": etype, "object": obj}).encode() + b"\n")
        await self.release.wait()
        return resp


def owned(obj: dict) -> bool:
    return any(r.get("controller") for r in obj["metadata"].get("ownerReferences") or [])


def test_objects_no_job_owns_stay_out_of_the_cache_and_the_handler():
    seen: list[tuple[str, str]] = []

    async def go() -> Informer:
        server = Server()
        async with fake_api(server.handle) as kube:
            informer = Informer(kube, "/api/v1/namespaces/ns/configmaps", kind="ConfigMap", keep=owned,
                                handler=lambda e, o: seen.append((e, o["metadata"]["name"])))  # fmt: skip
            task = await run_informer(informer, lambda: ("ns", "last") in informer.cache)
            server.release.set()
            await stop(task)
            return informer

    informer = asyncio.run(go())
    assert sorted(informer.cache) == [("ns", "hostfile"), ("ns", "last")]
    assert seen == [("ADDED", "hostfile"), ("ADDED", "other"), ("DELETED", "other"), ("ADDED", "last")]
    assert informer.dropped == 3  # the two planted ones and "other" once disowned


@pytest.mark.parametrize(
    ("refs", "kept"),
    [
        (OURS, True),
        ([{**OURS[0], "controller": False}], False),  # an owner, but not the controller
        ([{**OURS[0], "kind": "Deployment", "apiVersion": "apps/v1"}], False),
        ([{**OURS[0], "apiVersion": "kubeflow.org/v2beta1"}], False),  # Kubeflow's MPIJob, not ours
        ([], False),
        (None, False),
        (["not a mapping"], False),
    ],
    ids=["ours", "not-controller", "other-kind", "other-group", "empty", "none", "garbage"],
)
def test_the_runner_keeps_what_one_of_its_job_kinds_controls(refs, kept):
    from kubernetes_asyncio import client as k8s_client

    from airflow_t9k.controller.runner import Controller, Settings
    from airflow_t9k.k8s.client import Kube

    async def check() -> bool:
        kube = Kube(k8s_client.ApiClient(k8s_client.Configuration(host="http://127.0.0.1:9")))
        try:
            controller = Controller(kube, Settings(namespaces=["ns"]))
            return controller._owned(cm("x", "1", refs))
        finally:
            await kube.close()

    assert asyncio.run(check()) is kept


def test_objects_left_out_are_never_decoded(monkeypatch):
    """Issue 29, 3: the list and the watch read an object's kind and metadata first; what keep
    leaves out (the planted 1 MB ConfigMaps) is skipped in the answer, never decoded whole."""
    from airflow_t9k.k8s import client as k8s_client

    decoded: list[int] = []
    real = k8s_client.decode

    def counting(raw):  # type: ignore[no-untyped-def]
        decoded.append(len(raw))
        return real(raw)

    monkeypatch.setattr(k8s_client, "decode", counting)

    async def go() -> Informer:
        server = Server()
        async with fake_api(server.handle) as kube:
            informer = Informer(kube, "/api/v1/namespaces/ns/configmaps", kind="ConfigMap", keep=owned)
            task = await run_informer(informer, lambda: ("ns", "last") in informer.cache)
            server.release.set()
            await stop(task)
            return informer

    informer = asyncio.run(go())
    assert sorted(informer.cache) == [("ns", "hostfile"), ("ns", "last")]
    assert decoded, decoded
    assert max(decoded) < 10_000, decoded  # the 1 MB ones never reached the decoder


def test_objects_kept_without_their_body_are_never_decoded_past_their_metadata(monkeypatch):
    """A ConfigMap kept but whose data the cache drops (an evidence record, or a forged one
    named like it) is read as kind and metadata only: its 1 MB of data never decoded."""
    from airflow_t9k.k8s import client as k8s_client

    decoded: list[int] = []
    real = k8s_client.decode
    monkeypatch.setattr(k8s_client, "decode", lambda raw: decoded.append(len(raw)) or real(raw))

    class BigOwned(Server):
        async def handle(self, request: web.Request) -> web.StreamResponse:
            if request.query.get("watch") != "true":
                item = {k: v for k, v in cm("big", "5", OURS, BIG).items() if k != "kind"}  # a LIST's items have no kind
                return web.json_response({"metadata": {"resourceVersion": "10"}, "items": [item]})
            resp = web.StreamResponse()
            await resp.prepare(request)
            await resp.write(json.dumps({"type": "ADDED", "object": cm("last", "11", OURS, BIG)}).encode() + b"\n")
            await self.release.wait()
            return resp

    async def go() -> Informer:
        server = BigOwned()
        async with fake_api(server.handle) as kube:
            informer = Informer(kube, "/api/v1/namespaces/ns/configmaps", kind="ConfigMap", keep=owned, body=lambda o: False)
            task = await run_informer(informer, lambda: ("ns", "last") in informer.cache)
            server.release.set()
            await stop(task)
            return informer

    informer = asyncio.run(go())
    assert sorted(informer.cache) == [("ns", "big"), ("ns", "last")]
    assert all("data" not in o and o["kind"] == "ConfigMap" for o in informer.cache.values()), informer.cache
    assert all(n < 10_000 for n in decoded), decoded
