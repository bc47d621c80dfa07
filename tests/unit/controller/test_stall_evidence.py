"""A stall's evidence in the job's ``<job>-evidence`` (reconcile/evidence.py keep_stall, the
executor's merge): the stall's keys beside the end's, never taken for a finished replica's log,
within a ConfigMap's 1 MiB, and a merge that leaves the ConfigMap's uid on record."""

from __future__ import annotations

import asyncio
import copy
import json
from collections import Counter

from airflow_t9k.api import ownership
from airflow_t9k.api.evidence import kept_logs
from airflow_t9k.controller.apply import Executor
from airflow_t9k.controller.reconcile import Observed
from airflow_t9k.controller.reconcile.actions import KeepEvidence, Plan
from airflow_t9k.controller.reconcile.evidence import (
    ANNOTATION_FINAL,
    ANNOTATION_STALL,
    MAX_LOG_BYTES,
    STALL_LOG_BUDGET,
    final_kept,
    keep_first,
    keep_stall,
    stall_kept,
)
from airflow_t9k.controller.reconcile.status import StatusBuilder
from airflow_t9k.k8s.informer import Informer
from airflow_t9k.ui.view import kept as ui_kept
from tests.builders import NOW, generic, pod, ts

REC = {"key": ts(-100), "decidedAt": ts(0), "lastReportAt": ts(-100), "lastReplica": "j-worker-0", "deadlineSeconds": 60,
       "action": "Restart"}  # fmt: skip


def _cm(**annotations: str) -> dict:
    return {"kind": "ConfigMap", "metadata": {"name": "j-evidence", "uid": "uid-cm", "annotations": annotations}}


def test_the_stall_keys_and_annotation_and_a_log_share_that_fits_beside_the_end():
    job = generic("j", ("worker", 48))
    pods = [pod(f"j-worker-{i}") for i in range(48)]
    keep = keep_stall(job, Observed.of(*pods), StatusBuilder({"progress": {"step": 3, "history": {"points": []}}}, NOW), REC)
    assert keep.manifest["metadata"]["annotations"] == {ANNOTATION_STALL: ts(-100)}
    assert (keep.log_key.format(pod="p"), keep.events_key) == ("stall.p.txt", "stall.events.json")
    assert keep.log_bytes * len(keep.pods) <= STALL_LOG_BUDGET
    summary = json.loads(keep.manifest["data"]["stall.summary.json"])
    assert summary["stall"]["lastReplica"] == "j-worker-0"
    assert summary["progress"] == {"step": 3}  # no history
    assert summary["replicas"]["j-worker-0"]["phase"] == "Running"
    # Both parts together stay under a ConfigMap's 1 MiB: the end's logs and summary, and each part's Events.
    assert 48 * MAX_LOG_BYTES + 32 * 1024 + STALL_LOG_BUDGET + 8 * 1024 + 2 * 50 * 700 < 1024 * 1024


def test_which_parts_the_configmap_holds():
    job = generic("j")
    assert not final_kept(job, Observed())
    assert final_kept(job, Observed.of(_cm()))  # an earlier version's: the end's only
    assert not final_kept(job, Observed.of(_cm(**{ANNOTATION_STALL: ts(-100)})))
    assert final_kept(job, Observed.of(_cm(**{ANNOTATION_STALL: ts(-100), ANNOTATION_FINAL: "true"})))
    assert stall_kept(job, Observed.of(_cm(**{ANNOTATION_STALL: ts(-100)})), ts(-100))
    assert not stall_kept(job, Observed.of(_cm(**{ANNOTATION_STALL: ts(-200)})), ts(-100))


def test_the_end_merges_into_a_stalls_configmap():
    from airflow_t9k.controller.reconcile.actions import Delete

    job = generic("j")
    sb = StatusBuilder({"phase": "Failed"}, NOW)
    [keep, *_] = keep_first(job, Observed.of(_cm(**{ANNOTATION_STALL: ts(-100)})), sb, [Delete("Pod", "j-worker-0", "u")])
    assert isinstance(keep, KeepEvidence)
    assert (keep.merge, keep.manifest["metadata"]["annotations"]) == (True, {ANNOTATION_FINAL: "true"})


def test_readers_take_no_stall_key_for_a_finished_replicas_log():
    job = {**generic("j"), "status": {ownership.CREATED: {"ConfigMap": {"j-evidence": {"uid": "uid-cm"}}}}}
    data = {"stall.j-worker-0.txt": "hung\n", "stall.summary.json": "{}", "stall.events.json": "[]"}
    assert kept_logs({**_cm(), "data": data}, job) == {}
    assert ui_kept(data, set()) is None


class FakeKube:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def request_text(self, path, query):
        self.calls.append(("log", path, query["limitBytes"]))
        return "step 7\nwaiting on allreduce\n"

    async def get(self, path, query=None):
        return {"items": [{"type": "Warning", "reason": "Stalled", "message": "m", "lastTimestamp": ts(0)}]}

    async def patch(self, path, body, content_type="application/merge-patch+json"):
        self.calls.append(("patch", path, body))
        return {"kind": "ConfigMap", "metadata": {"name": "j-evidence", "namespace": "ns", "resourceVersion": "9"}}

    async def replace(self, path, body):
        self.calls.append(("replace", path, body))
        return body

    async def create(self, path, body):
        self.calls.append(("create", path, body.get("kind")))
        return {**body, "metadata": {**body["metadata"], "uid": "uid-new"}}


def test_the_executor_merges_into_the_jobs_own_configmap_and_keeps_its_uid_on_record():
    job = generic("j")
    job["metadata"]["resourceVersion"] = "7"
    job["status"] = {"phase": "Running", ownership.CREATED: {"ConfigMap": {"j-evidence": {"uid": "uid-cm"}}}}
    observed = Observed.of(_cm(**{ANNOTATION_FINAL: "true"}), pod("j-worker-0"), pod("j-worker-1"))
    keep = keep_stall(job, observed, StatusBuilder(job["status"], NOW), REC)
    assert keep.merge
    informers: dict[str, Informer] = {}

    def informer_for(kind, ns):
        return informers.setdefault(kind, Informer(None, "", kind=kind))  # type: ignore[arg-type] - only its cache

    informer_for("GenericJob", "ns").store(copy.deepcopy(job))
    kube = FakeKube()
    status = {**job["status"], "stall": REC}
    asyncio.run(Executor(kube, informer_for, Counter()).apply(job, Plan((keep,), status)))
    [write] = [c for c in kube.calls if c[0] == "replace"]
    assert write[2]["status"][ownership.CREATED]["ConfigMap"]["j-evidence"] == {"uid": "uid-cm"}  # no new create decided
    assert not [c for c in kube.calls if c[0] == "create" and c[2] == "ConfigMap"]
    [patch] = [c for c in kube.calls if c[0] == "patch"]
    assert patch[1] == "/api/v1/namespaces/ns/configmaps/j-evidence"
    assert patch[2]["metadata"] == {"annotations": {ANNOTATION_STALL: ts(-100)}}
    assert patch[2]["data"]["stall.j-worker-0.txt"] == "step 7\nwaiting on allreduce\n"
    assert json.loads(patch[2]["data"]["stall.events.json"])[0]["reason"] == "Stalled"
    assert {c[2] for c in kube.calls if c[0] == "log"} == {keep.log_bytes}
