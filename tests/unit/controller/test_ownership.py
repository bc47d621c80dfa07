"""api/ownership.py and the executor: a child is the job's only when the controller created it
(issue 29, items 2 and 4); the job's Services select its pods by its uid."""

from __future__ import annotations

import pytest

from airflow_t9k.api.ownership import deciding, legacy, owner_of, record, verdict
from airflow_t9k.controller.runner import Controller, Settings
from airflow_t9k.k8s.errors import from_response
from tests.builders import generic, run


def child(uid: str, created: str = "2026-01-01T12:00:05Z", owner: str = "GenericJob") -> dict:
    return {"metadata": {"uid": uid, "creationTimestamp": created,
                         "ownerReferences": [{"kind": owner, "name": "j", "uid": "u1", "controller": True}]}}  # fmt: skip


def test_the_decision_goes_on_record_before_the_create_and_keeps_its_first_time():
    status = deciding({"phase": "Running"}, [("Pod", "j-worker-0")], "2026-01-01T12:00:00Z")
    assert record(status) == {"Pod": {"j-worker-0": {"at": "2026-01-01T12:00:00Z"}}}
    assert status["phase"] == "Running"
    again = deciding(status, [("Pod", "j-worker-0"), ("Service", "j-worker-0")], "2026-01-01T12:00:09Z")
    assert record(again)["Pod"]["j-worker-0"] == {"at": "2026-01-01T12:00:00Z"}  # a decision from a pass that stopped
    replaced = deciding({"created": {"Pod": {"j-worker-0": {"uid": "old"}}}}, [("Pod", "j-worker-0")], "2026-01-01T13:00:00Z")
    assert record(replaced)["Pod"]["j-worker-0"] == {"at": "2026-01-01T13:00:00Z"}  # a restart: a new pod
    assert not legacy(deciding({"startTime": "t"}, [], "t"))  # from the first write on, never legacy


@pytest.mark.parametrize(
    ("status", "obj", "expected"),
    [
        ({"created": {"Pod": {"p": {"uid": "a"}}}}, child("a"), "recorded"),
        ({"created": {"Pod": {"p": {"uid": "a"}}}}, child("b"), None),
        ({"created": {"Pod": {"p": {"at": "2026-01-01T12:00:00Z"}}}}, child("b"), "decided"),
        ({"created": {"Pod": {"p": {"at": "2026-01-01T12:00:10Z"}}}}, child("b"), None),  # made before the decision
        ({"created": {}}, child("b"), None),
        ({}, child("b"), None),  # a new job: nothing is its own before the controller makes it
        ({"startTime": "2026-01-01T11:00:00Z"}, child("b"), "legacy"),
        ({"created": "garbage"}, child("b"), None),
        # Refused once (a pre-made one, found in the second of the decision): never taken later.
        ({"created": {"Pod": {"p": {"refused": "b"}}}}, child("b"), None),
    ],
)
def test_verdict(status, obj, expected):
    assert verdict(status, "Pod", "p", obj) == expected


def test_owner_of_names_the_other_job():
    assert owner_of(child("x", owner="PyTorchTrainingJob")) == "its controller is PyTorchTrainingJob j (uid u1)"
    assert owner_of({"metadata": {}}) == "it names no controller"


def test_a_service_selects_its_replica_by_the_jobs_uid():
    p = run(generic("j", ("worker", 1)))
    svc = next(a.manifest for a in p.actions if getattr(a, "kind", None) == "Service")
    pod = next(a.manifest for a in p.actions if getattr(a, "kind", None) == "Pod")
    assert svc["spec"]["selector"]["batch.tensorstack.dev/job-uid"] == "uid-j"
    assert all(pod["metadata"]["labels"][k] == v for k, v in svc["spec"]["selector"].items())


class Api:
    """What _create and _foreign call: a create answered AlreadyExists, and the GET of what is there."""

    def __init__(self, existing: dict) -> None:
        self.existing = existing

    async def create(self, path: str, body: dict) -> dict:
        raise from_response(409, '{"reason": "AlreadyExists", "message": "exists"}')

    async def get(self, path: str, query: dict | None = None) -> dict:
        return self.existing


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("status", "existing", "refused"),
    [
        ({"created": {}}, child("forged"), True),  # pre-made, or a same-named job's of another kind
        ({"created": {"Pod": {"j-worker-0": {"uid": "mine"}}}}, child("mine"), False),  # the cache was behind
        ({"created": {"Pod": {"j-worker-0": {"at": "2026-01-01T12:00:00Z"}}}}, child("mine"), False),  # made before a crash
    ],
    ids=["foreign", "recorded", "decided-earlier"],
)
async def test_a_child_of_the_name_not_created_for_the_job_fails_it_naming_its_owner(status, existing, refused):
    controller = Controller(kube=Api(existing), settings=Settings(namespaces=["ns"], kinds=["GenericJob"]))  # type: ignore[arg-type]
    job = {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ns", "uid": "u1"}, "status": status}
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j-worker-0"}}
    children: dict = {}
    problem = await controller.executor._create("ns", manifest, job, children)
    if refused:
        assert problem is not None
        assert "was not created by the controller for this job" in problem
        assert "its controller is GenericJob j (uid u1)" in problem
        assert children == {"Pod": {"j-worker-0": "refused:forged"}}  # on record as refused
    else:
        assert problem is None
        assert children == {"Pod": {"j-worker-0": existing["metadata"]["uid"]}}
