"""The controller's index of children by owner: our own creations count before the watch echoes them."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.runner import Controller, Settings


def job(uid: str = "u1", created: dict | None = None, **status: object) -> dict:
    """A job whose status records the children the controller created (default: j-worker-0)."""
    created = {"Pod": {"j-worker-0": {"uid": "p-j-worker-0"}}} if created is None else created
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob",
            "metadata": {"name": "j", "namespace": "ns", "uid": uid}, "status": {"created": created, **status}}  # fmt: skip


def pod(name: str, owner_uid: str = "u1", owner_kind: str = "GenericJob", ns: str = "ns", owner_name: str = "j",
        uid: str | None = None, created: str = "2026-01-01T12:00:05Z") -> dict:  # fmt: skip
    ref = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": owner_kind, "name": owner_name, "uid": owner_uid,
           "controller": True}  # fmt: skip
    meta = {"name": name, "namespace": ns, "uid": uid or f"p-{name}", "resourceVersion": "5", "ownerReferences": [ref],
            "creationTimestamp": created}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": "Pending"}}


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


DECIDED = {"Pod": {"j-worker-0": {"at": "2026-01-01T12:00:00Z"}}}
LEGACY = {"startTime": "2026-01-01T11:00:00Z"}


@pytest.mark.parametrize(
    ("child", "status_job", "observed", "adopted"),
    [
        (pod("j-worker-0"), job(), True, False),  # the uid on record
        # Issue 29, 2: a pod with a forged controller reference is not a replica...
        (pod("j-worker-0", uid="forged"), job(), False, False),  # ...in the job's namespace, not made by the controller
        (pod("j-worker-0", ns="other"), job(created={"Pod": {"j-worker-0": {"uid": "p-j-worker-0"}}}), False, False),
        (pod("j-worker-0", owner_name="k"), job(), False, False),  # the reference names another job
        (pod("j-worker-0", owner_kind="PyTorchTrainingJob"), job(), False, False),
        (pod("j-worker-1"), job(), False, False),  # nothing on record for that name
        # A create decided on record, the controller stopped before recording the uid: adopted.
        (pod("j-worker-0", created="2026-01-01T12:00:01Z"), job(created=DECIDED), True, True),
        (pod("j-worker-0", created="2026-01-01T11:59:59Z"), job(created=DECIDED), False, False),  # made before the decision
        # A job from before the record: its controller references decide, until it is recorded.
        (pod("j-worker-0", uid="old"), {**job(), "status": LEGACY}, True, True),
    ],
    ids=["recorded", "forged-same-ns", "other-namespace", "other-name", "other-kind", "unrecorded-name", "decided",
         "made-before-the-decision", "legacy"],
)  # fmt: skip
def test_a_child_counts_only_in_its_namespace_by_name_and_on_record(controller, child, status_job, observed, adopted):
    controller.informers[("Pod", "")] = controller.informer_for("Pod", "ns")  # one cache serves both namespaces here
    other = child["metadata"]["namespace"] != "ns"
    if other:
        controller.settings.namespaces.append("other")
        controller.scopes.append("other")
        controller.informers[("Pod", "other")] = controller.informer_for("Pod", "ns")
    controller.informer_for("Pod", child["metadata"]["namespace"]).store(child)
    controller._on_child("ADDED", child)
    found, adopt = controller.owned_children(status_job)
    assert (list(found["Pod"]) == [child["metadata"]["name"]]) is observed
    assert bool(adopt) is adopted
