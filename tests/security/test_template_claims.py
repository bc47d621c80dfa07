"""Attacks on job templates by a DAG author (a worker's real token, bound to the shipped namespace
Role): a job claiming, in its own annotation, that a platform template was merged into it; and a
job naming a cluster template the platform meant for another team (issue 29, 8)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import config

from airflow_t9k.kinds.templates import ANNOTATION
from tests.builders import generic
from tests.integration.test_airflow_rbac import _apply_rbac
from tests.support.cluster import wait_until
from tests.support.jobs import Jobs
from tests.support.templates import Templates, template, unique

POD = {"spec": {"containers": [{"name": "main", "image": "approved:1"}], "serviceAccountName": "default"}}


@pytest.fixture
def templates(api_client, namespace) -> Iterator[Templates]:
    t = Templates(api_client, namespace)
    yield t
    t.cleanup()


@pytest.fixture
def author(api_client, cluster, namespace, crds, tmp_path) -> Jobs:
    kubeconfigs, _ = _apply_rbac(api_client, cluster, namespace, "rbac-airflow-namespace.yaml", tmp_path)
    return Jobs(config.new_client_from_config(config_file=str(kubeconfigs["worker"])), namespace)


def _claim(name: str) -> dict:
    return {ANNOTATION: json.dumps({"kind": "ClusterT9kJobTemplate", "name": name, "uid": str(uuid.uuid4()),
                                    "resourceVersion": "1"})}  # fmt: skip


def test_a_job_claiming_a_merge_in_its_annotation_never_reads_template_resolved(jobs, author, controller):
    job = generic("claims", ("worker", 1))
    job["metadata"]["annotations"] = _claim("approved-gpu")
    author.create(job)
    wait_until(lambda: jobs.pods("claims"), timeout=30, what="the job's pod")
    jobs.wait_phase("GenericJob", "claims", "Running", timeout=30)
    assert jobs.condition("GenericJob", "claims", "TemplateResolved") is None
    assert "template" not in (jobs.get("GenericJob", "claims").get("status") or {})


def test_a_job_naming_a_template_and_claiming_it_merged_gets_it_merged(jobs, author, templates, controller):
    templates.create(template("approved", "GenericJob", POD))
    job = generic("claims-ref", ("worker", 1))
    del job["spec"]["replicaSpecs"][0]["template"]
    job["spec"]["templateRef"] = {"name": "approved"}
    job["metadata"]["annotations"] = _claim("approved")  # "already merged": skip the template
    author.create(job)
    wait_until(lambda: jobs.pods("claims-ref"), timeout=30, what="the job's pod")
    pod = jobs.pods("claims-ref")["claims-ref-worker-0"]
    assert pod.spec.containers[0].image == "approved:1"
    done = jobs.get("GenericJob", "claims-ref")
    assert done["status"]["template"]["name"] == "approved"
    assert done["status"]["template"]["kind"] == "T9kJobTemplate"
    resolved = jobs.condition("GenericJob", "claims-ref", "TemplateResolved")
    assert resolved["status"] == "True", resolved
    assert "T9kJobTemplate" in resolved["message"], resolved


def test_a_cluster_template_for_another_team_is_refused(jobs, author, templates, controller, namespace):
    name = unique("team-b-gpu")
    templates.create(template(name, "GenericJob", POD, cluster=True, allowedNamespaces=["team-b-only"]))
    job = generic("borrow", ("worker", 1))
    del job["spec"]["replicaSpecs"][0]["template"]
    job["spec"]["templateRef"] = {"name": name, "kind": "ClusterT9kJobTemplate"}
    author.create(job)
    done = jobs.wait_phase("GenericJob", "borrow", "Failed", timeout=30)
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "TemplateNotAllowed", failed
    assert namespace in failed["message"], failed
    assert jobs.pods("borrow") == {}
