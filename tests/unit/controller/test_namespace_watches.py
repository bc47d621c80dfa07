"""controller/watches.py and the runner with --namespace-selector: children are watched only in
the namespaces the controller manages, started and stopped as namespaces are (re)labelled
(issue 29, 3). Fake informers: what is checked is which watches exist when."""

from __future__ import annotations

import asyncio

import pytest

from airflow_t9k.controller.runner import Controller, Settings
from airflow_t9k.controller.scope import Scope, parse_selector
from airflow_t9k.controller.watches import NamespaceWatches


class FakeInformer:
    def __init__(self, kind: str, ns: str) -> None:
        self.kind, self.ns = kind, ns
        self.synced = asyncio.Event()
        self.cache: dict = {}
        self.healthy = True
        self.cancelled = False

    async def run(self) -> None:
        self.synced.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    def get(self, key):
        return self.cache.get(key)


@pytest.mark.asyncio
async def test_a_namespace_is_watched_while_managed_and_its_jobs_planned_once_listed():
    made: list[FakeInformer] = []
    listed: list[str] = []

    def make(kind: str, ns: str) -> FakeInformer:
        made.append(FakeInformer(kind, ns))
        return made[-1]

    watches = NamespaceWatches(make, ("Pod", "ConfigMap"), listed.append)  # type: ignore[arg-type]
    watches.start("team-a")
    watches.start("team-a")  # once
    await watches.wait_synced()
    await asyncio.sleep(0)
    assert [(i.kind, i.ns) for i in made] == [("Pod", "team-a"), ("ConfigMap", "team-a")]
    assert listed == ["team-a"]
    assert watches.synced("team-a")
    assert not watches.synced("team-b")
    watches.stop("team-a")
    await asyncio.sleep(0)
    assert all(i.cancelled for i in made)
    assert watches.get("Pod", "team-a") is None
    await watches.close()


@pytest.mark.asyncio
async def test_the_runner_starts_and_stops_watches_as_namespaces_are_labelled(monkeypatch):
    scope = Scope(selector=parse_selector("airflow-t9k.io/jobs=enabled"))
    controller = Controller(kube=None, settings=Settings(kinds=["GenericJob"], scope=scope))  # type: ignore[arg-type]
    monkeypatch.setattr(controller, "_child_informer", lambda kind, ns: FakeInformer(kind, ns))
    controller.per_namespace.make = controller._child_informer  # type: ignore[union-attr]
    assert not any(k == "Pod" for k, _ in controller.informers)  # no cluster-wide child watch
    namespaces = controller.informers[("Namespace", "")]

    def label(name: str, labels: dict, event: str = "MODIFIED") -> None:
        obj = {"kind": "Namespace", "metadata": {"name": name, "labels": labels, "resourceVersion": "1"}}
        namespaces.cache[("", name)] = obj
        if event == "DELETED":
            namespaces.cache.pop(("", name))
        controller._on_namespace(event, obj)

    label("team-a", {"airflow-t9k.io/jobs": "enabled"}, "ADDED")
    label("flood", {}, "ADDED")  # a namespace it does not manage: nothing of it is watched
    assert controller.per_namespace.watching("team-a")
    assert not controller.per_namespace.watching("flood")
    assert controller.informer_for("Pod", "team-a").ns == "team-a"  # type: ignore[attr-defined]
    assert controller.informer_for("Pod", "flood").get(("flood", "x")) is None  # an empty stand-in
    label("team-a", {})  # unlabelled: its watches stop
    assert not controller.per_namespace.watching("team-a")  # type: ignore[union-attr]
    label("flood", {"airflow-t9k.io/jobs": "enabled"})
    assert controller.per_namespace.watching("flood")  # type: ignore[union-attr]
    label("flood", {"airflow-t9k.io/jobs": "enabled"}, "DELETED")
    assert not controller.per_namespace.watching("flood")  # type: ignore[union-attr]
    await controller.per_namespace.close()  # type: ignore[union-attr]
