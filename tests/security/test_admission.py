"""Attacks refused at admission by the local API server: the optional ValidatingAdmissionPolicy
(deploy/optional/admission-policy.yaml) refuses the job itself; Pod Security labels on the
namespace refuse the controller's pod, and the job fails saying so.

The policy is applied under a unique name and bound only to this test's namespace (a label),
so other tests on the same cluster are not affected."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kind_jobs import minimal
from tests.support.cluster import wait_until

if TYPE_CHECKING:
    from tests.support.jobs import Jobs

POLICY = Path(__file__).resolve().parents[2] / "deploy" / "optional" / "admission-policy.yaml"
KINDS = ["GenericJob", "MPIJob", "AscendJob", "BeamJob", "PyTorchTrainingJob"]


def pod_specs(job: dict) -> list[dict]:
    """The pod templates the policy must see, per kind shape."""
    spec = job["spec"]
    if job["kind"] == "BeamJob":
        return [spec["jobTemplate"]["spec"]["template"]["spec"]]
    if "worker" in spec:
        return [spec["worker"]["template"]["spec"]]
    specs = spec["replicaSpecs"]
    return [r["template"]["spec"] for r in (specs.values() if isinstance(specs, dict) else specs)]


def attacked(kind: str, attack: str) -> dict:
    job = minimal(kind, f"a-{uuid.uuid4().hex[:6]}")
    job["metadata"].pop("uid", None)
    for p in pod_specs(job):
        if attack == "privileged":
            p["containers"][0]["securityContext"] = {"privileged": True}
        elif attack == "hostPID":
            p["hostPID"] = True
        elif attack == "hostNetwork":
            p["hostNetwork"] = True
        elif attack == "hostPort":  # a port of the node, beside its other pods and daemons
            p["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
        elif attack == "hostPath":
            p["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
        elif attack == "serviceAccount":
            p["serviceAccountName"] = "kube-controller-manager"
    return job


@pytest.fixture
def policy(api_client, namespace) -> Iterator[str]:
    suffix = uuid.uuid4().hex[:6]
    label = f"sec-{suffix}.airflow-t9k.io/policy"
    policy, binding = yaml.safe_load_all(POLICY.read_text())
    policy["metadata"]["name"] = f"airflow-t9k-job-pods-{suffix}"
    binding["metadata"]["name"] = policy["metadata"]["name"]
    binding["spec"]["policyName"] = policy["metadata"]["name"]
    binding["spec"]["matchResources"]["namespaceSelector"] = {"matchLabels": {label: "on"}}
    client.CoreV1Api(api_client).patch_namespace(namespace, {"metadata": {"labels": {label: "on"}}})
    adm = client.AdmissionregistrationV1Api(api_client)
    adm.create_validating_admission_policy(policy)
    adm.create_validating_admission_policy_binding(binding)
    try:
        yield policy["metadata"]["name"]
    finally:
        adm.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        adm.delete_validating_admission_policy(policy["metadata"]["name"])


def _refusal(jobs: Jobs, job: dict) -> str | None:
    try:
        created = jobs.create(job)
    except ApiException as exc:
        return f"{exc.status} {exc.body}"
    jobs.delete(created["kind"], created["metadata"]["name"])
    return None


def _effective(jobs: Jobs) -> None:
    # A new policy takes effect within a moment (its type check and informer sync).
    wait_until(lambda: _refusal(jobs, attacked("GenericJob", "hostPID")), timeout=30, what="the policy in effect")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("attack", ["privileged", "hostPID", "hostNetwork", "hostPort", "hostPath", "serviceAccount"])
def test_the_admission_policy_refuses_the_escape(jobs, policy, kind, attack):
    _effective(jobs)
    why = _refusal(jobs, attacked(kind, attack))
    assert why is not None, why
    assert why.startswith("403"), why
    assert policy in why


@pytest.mark.parametrize("kind", KINDS)
def test_the_admission_policy_lets_an_ordinary_job_through(jobs, policy, kind):
    _effective(jobs)
    job = minimal(kind, f"ok-{uuid.uuid4().hex[:6]}")
    job["metadata"].pop("uid", None)
    for p in pod_specs(job):
        p["serviceAccountName"] = "default"
    assert _refusal(jobs, job) is None


def test_pod_security_labels_refuse_the_pod_and_the_job_fails_saying_so(jobs, core, namespace, controller):
    core.patch_namespace(namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    job: dict[str, Any] = attacked("GenericJob", "hostPID")
    name = job["metadata"]["name"]
    jobs.create(job)
    done = jobs.wait_phase("GenericJob", name, "Failed", timeout=30)
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert "violates PodSecurity" in failed["message"], failed
    assert jobs.pods(name) == {}
    ok = copy.deepcopy(minimal("GenericJob", "fine"))
    ok["metadata"].pop("uid", None)
    jobs.create(ok)
    wait_until(lambda: len(jobs.pods("fine")) == 2, timeout=30, what="an ordinary job's pods under baseline")


def test_the_admission_policy_checks_what_a_job_template_brings(api_client, jobs, policy, controller):
    """A job naming a template holds no pod when it is created; the policy sees the template's pod in
    the controller's update that merges it (docs/templates.md), and the job fails without a pod."""
    from tests.support.templates import Templates, template

    _effective(jobs)
    pod = {"spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}], "containers": [{"name": "main", "image": "i"}]}}
    Templates(api_client, jobs.ns).create(template("host", "GenericJob", pod))
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "via-template"},
                 "spec": {"templateRef": {"name": "host"}, "replicaSpecs": [{"type": "worker", "replicas": 1}]}})  # fmt: skip
    done = jobs.wait_phase("GenericJob", "via-template", "Failed", timeout=30)
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert "refused the job merged with its template" in failed["message"], failed
    assert policy in failed["message"], failed
    assert "hostPath" in failed["message"]
    assert jobs.pods("via-template") == {}
