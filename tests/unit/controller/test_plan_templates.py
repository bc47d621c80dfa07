"""A job naming a job template: the pass that merges it writes only the spec (reconcile/template.py)."""

from __future__ import annotations

import json
from datetime import timedelta

from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.controller.reconcile.actions import Create, WriteSpec
from airflow_t9k.kinds.templates import ANNOTATION, apply_template, record_of, unresolved
from tests.builders import NOW

TEMPLATE = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "T9kJobTemplate",
            "metadata": {"name": "t", "namespace": "ns", "uid": "tu", "resourceVersion": "7"},
            "spec": {"jobKind": "GenericJob",
                     "template": {"spec": {"containers": [{"name": "main", "image": "img"}]}}}}  # fmt: skip


def job(created: timedelta = timedelta(0), **status: object) -> dict:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob",
            "metadata": {"name": "j", "namespace": "ns", "uid": "ju",
                         "creationTimestamp": (NOW - created).strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"templateRef": {"name": "t"}, "replicaSpecs": [{"type": "worker", "replicas": 2}]},
            **({"status": status} if status else {})}  # fmt: skip


def stored(p) -> dict:
    """The job as the executor leaves it after the pass's WriteSpec: the merged spec, then the
    record in its status (controller/apply.py)."""
    action = p.actions[0]
    return {**action.job, "status": {"template": action.record}}


def test_the_first_pass_writes_the_merged_spec_and_nothing_else():
    p = plan(job(), Observed(template=TEMPLATE), NOW)
    assert [type(a) for a in p.actions] == [WriteSpec]
    written = p.actions[0].job
    assert p.actions[0].record == {"kind": "T9kJobTemplate", "name": "t", "namespace": "ns", "uid": "tu", "resourceVersion": "7"}
    assert written["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"] == [{"name": "main", "image": "img"}]
    assert json.loads(written["metadata"]["annotations"][ANNOTATION])["resourceVersion"] == "7"
    assert p.status == {}  # no status write before the spec is decided
    assert [e.reason for e in p.events] == ["TemplateResolved"]


def test_the_merged_job_is_planned_from_its_spec_alone_and_says_where_it_came_from():
    merged = {**apply_template(job(), TEMPLATE), "status": {"template": record_of(TEMPLATE)}}
    p = plan(merged, Observed(template=None), NOW)  # the template may be gone: it is not read again
    assert sorted(p.creates("Pod")) == ["j-worker-0", "j-worker-1"]
    pod = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod")
    assert pod["spec"]["containers"][0]["image"] == "img"
    resolved = next(c for c in p.status["conditions"] if c["type"] == "TemplateResolved")
    assert resolved["status"] == "True"
    assert "GenericJob" not in resolved["message"]
    assert "ns/t (resourceVersion 7)" in resolved["message"]


def test_a_missing_template_is_waited_for_then_fails_the_job():
    waiting = plan(job(timedelta(seconds=10)), Observed(template_wait=30), NOW)
    assert waiting.actions == ()
    assert waiting.status["phase"] == "Pending"
    cond = next(c for c in waiting.status["conditions"] if c["type"] == "TemplateResolved")
    assert (cond["status"], cond["reason"]) == ("False", "TemplateNotFound")
    assert "T9kJobTemplate ns/t does not exist" in cond["message"]
    assert waiting.requeue_after == 20
    assert [e.reason for e in waiting.events] == ["Pending", "TemplateNotFound"]
    again = plan(job(timedelta(seconds=11), **waiting.status), Observed(template_wait=30), NOW)
    assert again.events == ()  # said once

    failed = plan(job(timedelta(seconds=30), **waiting.status), Observed(template_wait=30), NOW)
    assert failed.status["phase"] == "Failed"
    assert failed.actions == ()
    cond = next(c for c in failed.status["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "TemplateNotFound"
    assert "create it, or name another template" in cond["message"]
    assert plan(job(timedelta(seconds=99), **failed.status), Observed(template=TEMPLATE), NOW).actions == ()  # over


def test_a_template_for_another_kind_fails_the_job_as_an_invalid_spec():
    other = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "jobKind": "MPIJob"}}
    p = plan(job(), Observed(template=other), NOW)
    cond = next(c for c in p.status["conditions"] if c["type"] == "Failed")
    assert p.status["phase"] == "Failed"
    assert cond["reason"] == "InvalidSpec"
    assert "is for MPIJob, not GenericJob" in cond["message"]


def test_a_deprecated_template_is_used_with_a_warning():
    deprecated = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "deprecated": True, "deprecationMessage": "use t2"}}
    p = plan(job(), Observed(template=deprecated), NOW)
    assert [type(a) for a in p.actions] == [WriteSpec]
    assert [(e.type, e.reason, e.message) for e in p.events][1] == (
        "Warning",
        "TemplateDeprecated",
        "T9kJobTemplate ns/t is deprecated: use t2",
    )
    later = plan(stored(p), Observed(), NOW)
    cond = next(c for c in later.status["conditions"] if c["type"] == "TemplateResolved")
    assert cond["reason"] == "Deprecated"
    assert "use t2" in cond["message"]


def test_a_job_that_sets_its_own_template_annotation_is_not_resolved_by_it():
    """Issue 29, 8: the annotation is the job author's to write; the record in status is the
    controller's. A job claiming a merge gets the template merged (and no TemplateResolved=True
    before that); one naming no template never reads TemplateResolved=True."""
    forged = job()
    forged["metadata"]["annotations"] = {ANNOTATION: json.dumps({"kind": "ClusterT9kJobTemplate", "name": "approved-gpu",
                                                                 "uid": "x", "resourceVersion": "1"})}  # fmt: skip
    assert unresolved(forged)
    p = plan(forged, Observed(template=TEMPLATE), NOW)
    assert [type(a) for a in p.actions] == [WriteSpec]
    assert p.actions[0].record["name"] == "t"
    assert json.loads(p.actions[0].job["metadata"]["annotations"][ANNOTATION])["name"] == "t"  # the real record
    untemplated = job()
    del untemplated["spec"]["templateRef"]
    untemplated["metadata"]["annotations"] = forged["metadata"]["annotations"]
    untemplated["spec"]["replicaSpecs"][0]["template"] = {"spec": {"containers": [{"name": "main", "image": "img"}]}}
    p = plan(untemplated, Observed(), NOW)
    assert not any(c["type"] == "TemplateResolved" for c in p.status["conditions"]), p.status["conditions"]
    assert sorted(p.creates("Pod")) == ["j-worker-0", "j-worker-1"]


def test_a_job_the_controller_resolved_before_the_record_moved_to_status_stays_resolved():
    legacy = apply_template(job(), TEMPLATE)
    said = {"type": "TemplateResolved", "status": "True", "reason": "Resolved", "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    legacy["status"] = {"phase": "Running", "conditions": [said]}
    assert not unresolved(legacy)
    assert not any(isinstance(a, WriteSpec) for a in plan(legacy, Observed(template=TEMPLATE), NOW).actions)


CLUSTER_TEMPLATE = {**TEMPLATE, "kind": "ClusterT9kJobTemplate", "metadata": {"name": "gpu", "uid": "cu", "resourceVersion": "3"},
                    "spec": {**TEMPLATE["spec"], "allowedNamespaces": ["team-a"]}}  # fmt: skip


def test_a_cluster_template_limited_to_some_namespaces_fails_a_job_elsewhere():
    j = job()
    j["spec"]["templateRef"] = {"name": "gpu", "kind": "ClusterT9kJobTemplate"}
    p = plan(j, Observed(template=CLUSTER_TEMPLATE), NOW)
    assert p.status["phase"] == "Failed"
    assert p.actions == ()
    cond = next(c for c in p.status["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "TemplateNotAllowed"
    assert "allowedNamespaces" in cond["message"]
    assert "ns" in cond["message"]
    j["metadata"]["namespace"] = "team-a"
    assert [type(a) for a in plan(j, Observed(template=CLUSTER_TEMPLATE), NOW).actions] == [WriteSpec]
    open_to_all = {**CLUSTER_TEMPLATE, "spec": {k: v for k, v in CLUSTER_TEMPLATE["spec"].items() if k != "allowedNamespaces"}}
    j["metadata"]["namespace"] = "ns"
    assert [type(a) for a in plan(j, Observed(template=open_to_all), NOW).actions] == [WriteSpec]
