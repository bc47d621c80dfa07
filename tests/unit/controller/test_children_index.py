"""The controller's index of children by owner: our own creations count before the watch echoes them."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.runner import Controller, Settings


def job(uid: str = "u1") -> dict:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob",
            "metadata": {"name": "j", "namespace": "ns", "uid": uid}}  # fmt: skip


def pod(name: str, owner_uid: str = "u1", owner_kind: str = "GenericJob") -> dict:
    ref = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": owner_kind, "name": "j", "uid": owner_uid, "controller": True}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": f"p-{name}",
            "resourceVersion": "5", "ownerReferences": [ref]}, "status": {"phase": "Pending"}}  # fmt: skip


@pytest.fixture
def controller() -> Controller:
    return Controller(kube=None, settings=Settings(namespaces=["ns"], kinds=["GenericJob"]))  # type: ignore[arg-type]


def test_a_child_we_created_is_observed_before_its_watch_event(controller):
    created = pod("j-worker-0")
    controller.informer_for("Pod", "ns").store(created)
    controller.executor.on_created(created)
    assert list(controller.observed(job()).pods) == ["j-worker-0"]
    assert len(controller.queue) == 0  # our own creation queues nothing; its watch event will


def test_the_watch_event_of_a_child_queues_its_owner_and_deletion_unindexes_it(controller):
    p = pod("j-worker-0")
    controller.informer_for("Pod", "ns").store(p)
    controller._on_child("ADDED", p)
    assert len(controller.queue) == 1
    controller._on_child("DELETED", p)
    assert controller.children == {}


@pytest.mark.parametrize("owner_kind", ["Deployment", "PyTorchTrainingJob"])
def test_children_of_other_owners_are_not_indexed(controller, owner_kind):
    controller.executor.on_created(pod("x", owner_kind=owner_kind))
    assert controller.children == {}


class Answers:
    """The one API call _create makes, answered with the given object (no cluster: the cache logic)."""

    def __init__(self, answer: dict) -> None:
        self.answer = answer

    async def create(self, path: str, body: dict) -> dict:
        return self.answer


@pytest.mark.asyncio
async def test_a_create_answered_after_the_watch_saw_the_pod_deleted_does_not_bring_it_back(controller):
    """The watch delivered ADDED then DELETED (the job was deleted, GC took the pod) before our
    POST's answer was handled: caching that answer would resurrect the pod for good."""
    informer = controller.informer_for("Pod", "ns")
    created = pod("j-worker-0")  # resourceVersion 5
    controller.executor.kube = Answers(created)
    informer.resource_version = "7"  # the watch is past it: ADDED (5) and DELETED (6) came and went
    await controller.executor._create("ns", pod("j-worker-0"))
    assert informer.get(("ns", "j-worker-0")) is None
    assert controller.children == {}
    informer.resource_version = "4"  # the watch is behind it: cache and index it now
    await controller.executor._create("ns", pod("j-worker-0"))
    assert informer.get(("ns", "j-worker-0")) is not None
    assert list(controller.observed(job()).pods) == ["j-worker-0"]
