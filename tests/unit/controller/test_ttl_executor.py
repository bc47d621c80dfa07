"""The executor's half of ``ttlSecondsAfterFinished`` (the decision is steps/expire.py): the job
itself is deleted with its uid as precondition, nothing is written to its status, and the cached
job is marked as being deleted so that the next pass plans nothing."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter

import pytest

from airflow_t9k.api.paths import job_path
from airflow_t9k.api.resources import resource_for
from airflow_t9k.controller.apply import Executor
from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.k8s.errors import Conflict, NotFound
from airflow_t9k.k8s.informer import Informer
from tests.builders import NOW, generic, ts

ENDED = {"phase": "Succeeded", "conditions": [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                               "message": "done", "lastTransitionTime": ts(-60)}]}  # fmt: skip


class FakeKube:
    def __init__(self, refuse: type[Exception] | None = None) -> None:
        self.refuse = refuse
        self.calls: list[tuple] = []

    async def delete(self, path, *, uid=None, propagation="Background"):
        self.calls.append(("delete", path, uid))
        if self.refuse is not None:
            raise self.refuse(404 if self.refuse is NotFound else 409, self.refuse.__name__, "refused")
        return {}

    async def replace(self, path, body):
        self.calls.append(("replace", path))
        return body

    async def create(self, path, body):
        self.calls.append(("create", path, body.get("reason")))
        return body


def _run(job, kube, informer):
    executor = Executor(kube, lambda kind, ns: informer, Counter())
    result = plan(copy.deepcopy(job), Observed(), NOW)
    asyncio.run(executor.apply(job, result))
    return executor


def _setup(refuse=None, deleting=False):
    job = generic(ttlSecondsAfterFinished=10)
    job["status"] = ENDED
    job["metadata"]["resourceVersion"] = "7"
    if deleting:
        job["metadata"]["deletionTimestamp"] = ts(0)
    informer = Informer(None, "", kind="GenericJob")  # type: ignore[arg-type] - only its cache is used
    informer.store(job)
    return job, FakeKube(refuse), informer


def test_the_job_is_deleted_by_its_uid_and_marked_in_the_cache():
    job, kube, informer = _setup()
    executor = _run(job, kube, informer)
    path = job_path(resource_for("GenericJob"), "ns", "job")
    assert [c for c in kube.calls if c[0] != "create"] == [("delete", path, "uid-job")]  # no status write
    assert ("create", "/api/v1/namespaces/ns/events", "TTLExpired") in kube.calls
    assert executor.metrics["delete_expired"] == 1
    cached = informer.get(("ns", "job"))
    assert cached["metadata"]["deletionTimestamp"]
    # The pass the watch or a timer brings before the deletion itself: nothing to do.
    again = plan(copy.deepcopy(cached), Observed(), NOW)
    assert (again.actions, again.events) == ((), ())


@pytest.mark.parametrize("refuse", [NotFound, Conflict], ids=["gone-already", "another-job-of-the-name"])
def test_a_job_gone_or_replaced_is_left_alone(refuse):
    job, kube, informer = _setup(refuse)
    executor = _run(job, kube, informer)
    assert [c[0] for c in kube.calls if c[0] != "create"] == ["delete"]
    assert executor.metrics["delete_expired"] == 0
    assert not informer.get(("ns", "job"))["metadata"].get("deletionTimestamp")  # nothing of ours to mark


def test_a_job_already_being_deleted_is_not_deleted_again():
    job, kube, informer = _setup(deleting=True)
    _run(job, kube, informer)
    assert kube.calls == []
