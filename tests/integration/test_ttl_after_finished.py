"""Finished jobs do not pile up (issue 44, item 8), against the real API server and controller: a
job with ``ttlSecondsAfterFinished`` is deleted that long after it succeeded, with what it owns;
one without stays. And the Airflow side: a retry delivers the success of a job the TTL deleted."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from kubernetes.client.exceptions import ApiException

from tests.integration.test_operator_trigger import conn, make_op  # noqa: F401 - fixtures
from tests.support.cluster import wait_until
from tests.support.task import context

TTL = 3
SIM = {"sim.t9k.test/duration": "1s", "sim.t9k.test/message": '{"metric": 0.91}'}


def _job(name: str, kind: str = "GenericJob", ttl: int | None = None) -> dict:
    container = {"name": "main" if kind == "GenericJob" else "pytorch", "image": "busybox", "command": ["train"]}
    replica = {"type": "worker", "replicas": 1, "template": {"metadata": {"annotations": dict(SIM)},
                                                             "spec": {"containers": [container]}}}  # fmt: skip
    spec: dict = {"replicaSpecs": [replica]}
    if ttl is not None:
        if kind == "GenericJob":
            spec["ttlSecondsAfterFinished"] = ttl  # it has no runPolicy
        else:
            spec["runPolicy"] = {"ttlSecondsAfterFinished": ttl}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def _exists(jobs, kind: str, name: str) -> bool:
    try:
        jobs.get(kind, name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _ended_at(job: dict) -> datetime:
    c = next(c for c in job["status"]["conditions"] if c["type"] == "Completed")
    return datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00"))


def test_a_job_with_a_ttl_is_deleted_that_long_after_it_succeeded_and_one_without_stays(jobs, controller):
    jobs.create(_job("keep"))
    jobs.create(_job("ttl", ttl=TTL))
    jobs.create(_job("ttl-pt", kind="PyTorchTrainingJob", ttl=TTL))
    done = jobs.wait_phase("GenericJob", "ttl", "Succeeded", timeout=30)
    ended = _ended_at(done)
    if (datetime.now(timezone.utc) - ended).total_seconds() < TTL - 1.5:
        assert _exists(jobs, "GenericJob", "ttl")  # not before its TTL
    wait_until(lambda: not _exists(jobs, "GenericJob", "ttl"), timeout=TTL + 10, interval=0.2, what="the job deleted")
    gone = datetime.now(timezone.utc)
    assert (gone - ended).total_seconds() >= TTL - 1  # the recorded end is cut to the second
    wait_until(lambda: not _exists(jobs, "PyTorchTrainingJob", "ttl-pt"), timeout=TTL + 10, what="runPolicy's TTL")
    # What it owned goes by owner references: its pod (and its Service, evidence, ...).
    wait_until(lambda: jobs.pods("ttl") == {}, timeout=15, what="the deleted job's pods garbage-collected")
    assert "TTLExpired" in jobs.reasons("ttl", "TTLExpired")
    # The job without a TTL stays, finished, past the other's TTL.
    time.sleep(1)
    assert jobs.phase("GenericJob", "keep") == "Succeeded"
    assert "TTLExpired" not in [e.reason for e in jobs.events("keep")]


def test_a_retry_delivers_the_success_of_a_job_the_ttl_deleted(conn, jobs, controller):
    store_ctx = context(try_number=1, max_tries=2)
    first = make_op(sim=SIM, deferrable=False, retries=2, ttl_after_finished=1, result_from="auto").execute(store_ctx)
    assert (first["phase"], first["result"]) == ("Succeeded", {"metric": 0.91})
    store = store_ctx["task_state_store"]
    wait_until(lambda: not _exists(jobs, "GenericJob", first["name"]), timeout=15, what="the job deleted by its TTL")
    # Try 1 failed after it delivered (its XCom backend, a lost worker): the retry, same series.
    retry = context(store, try_number=2, max_tries=2)
    again = make_op(sim=SIM, deferrable=False, retries=2, ttl_after_finished=1).execute(retry)
    assert (again["uid"], again["phase"], again["result"]) == (first["uid"], "Succeeded", {"metric": 0.91})
    assert retry["ti"].xcom["result"] == {"metric": 0.91}
    items = jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns, "genericjobs")["items"]
    assert items == []  # delivered from the task state store: nothing trained again
