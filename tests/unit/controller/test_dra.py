"""DRA devices (issue 47, item 4): what a pod's claims ask for (reconcile/dra.py), the pods and the
Kueue Workload carrying the claims, and status.usage counting the devices per DeviceClass."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from airflow_t9k.controller.features import claim_templates_path
from airflow_t9k.controller.reconcile import Create, Observed, plan
from airflow_t9k.controller.reconcile.dra import claim_devices, pod_devices, request_devices, template_devices
from airflow_t9k.controller.reconcile.usage import account, requested
from airflow_t9k.controller.slim import slim_for
from tests.builders import NOW, at, evidence, generic, ts
from tests.unit.controller.test_usage import RUNNING, gpu_pod, pods

Obj = dict[str, Any]
GPU_CLASS = "gpu.example.com"


def exactly(device_class: str | None = GPU_CLASS, **fields_: Any) -> Obj:
    return {"name": "r", "exactly": {**({"deviceClassName": device_class} if device_class else {}), **fields_}}


def template(name: str, *requests: Obj) -> Obj:
    spec = {"spec": {"devices": {"requests": list(requests)}}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name}, "spec": spec}


TEMPLATES = {
    "two-gpus": template("two-gpus", exactly(count=2)),
    "gpu-and-nic": template("gpu-and-nic", exactly(), exactly("nic.example.com", count=4)),
}


# -- one request ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (exactly(count=2), (GPU_CLASS, 2)),
        (exactly(), (GPU_CLASS, 1)),  # count defaults to 1
        (exactly(count=3, allocationMode="ExactCount"), (GPU_CLASS, 3)),
        (exactly(count=2, selectors=[{"cel": {"expression": "true"}}]), (GPU_CLASS, 2)),  # selectors narrow, not multiply
        (exactly(allocationMode="All"), None),  # as many as match: known only once allocated
        (exactly(count=2, adminAccess=True), None),  # access to others' devices, none of its own
        (exactly(count=2, adminAccess=False), (GPU_CLASS, 2)),
        (exactly(None, count=2), None),  # no class
        (exactly(count=0), None),
        (exactly(count="2"), None),  # not a number: counts nothing, raises nothing
        (exactly(count=True), None),
        ({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": GPU_CLASS, "count": 1}]}, None),  # a choice
        ({"name": "r", "deviceClassName": GPU_CLASS, "count": 2}, (GPU_CLASS, 2)),  # resource.k8s.io/v1beta1's shape
        ({"name": "r"}, None),
        ("hostile", None),
    ],
    ids=["count", "default-count", "exact-count", "selectors", "all", "admin-access", "admin-access-false", "no-class",
         "zero", "string-count", "bool-count", "first-available", "v1beta1", "empty", "not-a-mapping"],
)  # fmt: skip
def test_request_devices(request_, expected):
    assert request_devices(request_) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"devices": {"requests": [exactly(count=2), exactly(count=1)]}}, {GPU_CLASS: 3}),  # same class adds up
        ({"devices": {"requests": [exactly(), exactly("nic.example.com", count=4)]}}, {GPU_CLASS: 1, "nic.example.com": 4}),
        ({"devices": {"requests": [exactly(allocationMode="All"), exactly(count=2)]}}, {GPU_CLASS: 2}),  # the countable one
        ({"devices": {"requests": []}}, {}),
        ({"devices": {}}, {}),
        ({}, {}),
        (None, {}),
        ({"devices": {"requests": "x"}}, {}),
        ({"devices": "x"}, {}),
    ],
    ids=["same-class", "two-classes", "uncountable-skipped", "no-requests", "no-requests-key", "no-devices", "none",
         "requests-not-a-list", "devices-not-a-mapping"],
)  # fmt: skip
def test_claim_devices(spec, expected):
    assert claim_devices(spec) == expected


@pytest.mark.parametrize(
    ("tpl", "expected"),
    [(TEMPLATES["two-gpus"], {GPU_CLASS: 2}), (TEMPLATES["gpu-and-nic"], {GPU_CLASS: 1, "nic.example.com": 4}),
     ({"spec": {}}, {}), ({"spec": "x"}, {}), ({}, {}), (None, {})],
    ids=["two-gpus", "gpu-and-nic", "no-claim-spec", "spec-not-a-mapping", "empty", "none"],
)  # fmt: skip
def test_template_devices(tpl, expected):
    assert template_devices(tpl) == expected


# -- a pod ------------------------------------------------------------------------------------


def claims(*entries: tuple[str, str]) -> list[Obj]:
    """Pod resourceClaims: (name, template) entries; a template starting with '=' is a claim by name."""
    return [{"name": n, "resourceClaimName": t[1:]} if t.startswith("=") else {"name": n, "resourceClaimTemplateName": t}
            for n, t in entries]  # fmt: skip


@pytest.mark.parametrize(
    ("pod_claims", "expected"),
    [
        (claims(("gpu", "two-gpus")), {GPU_CLASS: 2}),
        (claims(("gpu", "two-gpus"), ("more", "gpu-and-nic")), {GPU_CLASS: 3, "nic.example.com": 4}),
        (claims(("gpu", "missing")), {}),  # template not there (not yet, or not watched): nothing
        (claims(("shared", "=team-gpus")), {}),  # a claim by name is shared: not the pod's own
        (claims(("shared", "=team-gpus"), ("gpu", "two-gpus")), {GPU_CLASS: 2}),
        ([], {}),
        (None, {}),
        (["hostile", {"name": "x"}], {}),
    ],
    ids=["one-template", "two-templates", "missing-template", "claim-by-name", "by-name-and-template", "empty", "none",
         "hostile"],
)  # fmt: skip
def test_pod_devices(pod_claims, expected):
    pod: Obj = {"spec": {"containers": [{"name": "main"}]}}
    if pod_claims is not None:
        pod["spec"]["resourceClaims"] = pod_claims
    assert pod_devices(pod, TEMPLATES) == expected


def test_pod_devices_without_templates_counts_nothing():
    assert pod_devices({"spec": {"resourceClaims": claims(("gpu", "two-gpus"))}}, {}) == {}


@pytest.mark.parametrize(
    ("namespace", "path"),
    [("ml", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates"),
     (None, "/apis/resource.k8s.io/v1/resourceclaimtemplates"), ("", "/apis/resource.k8s.io/v1/resourceclaimtemplates")],
)  # fmt: skip
def test_claim_templates_path(namespace, path):
    assert claim_templates_path(namespace) == path


# -- status.usage ---------------------------------------------------------------------------


def dra_pod(name: str, uid: str, start: float | None, end: float | None = None, code: int = 0,
            pod_claims: list[Obj] | None = None, limits: Obj | None = None) -> Obj:  # fmt: skip
    pod = gpu_pod(name, uid, start, end, code=code, limits=limits or {"cpu": "1"})
    pod["spec"]["resourceClaims"] = claims(("gpu", "two-gpus")) if pod_claims is None else pod_claims
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": c["name"]} for c in pod["spec"]["resourceClaims"]]
    return pod


@pytest.mark.parametrize(
    ("pod_claims", "limits", "accelerators"),
    [
        (claims(("gpu", "two-gpus")), {"cpu": "1"}, {GPU_CLASS: 2.0}),
        (claims(("gpu", "gpu-and-nic")), {"cpu": "1", "nvidia.com/gpu": "1"},
         {GPU_CLASS: 1.0, "nic.example.com": 4.0, "nvidia.com/gpu": 1.0}),  # DRA and device plugin side by side
        (claims(("shared", "=team-gpus")), {"cpu": "1"}, {}),
        ([], {"cpu": "1"}, {}),
    ],
    ids=["template", "template-and-extended-resource", "claim-by-name", "no-claims"],
)  # fmt: skip
def test_requested_counts_dra_devices_per_device_class(pod_claims, limits, accelerators):
    pod = dra_pod("p", "u", 0, pod_claims=pod_claims, limits=limits)
    assert requested(pod, TEMPLATES) == (accelerators, 1.0)
    assert requested(pod) == ({k: v for k, v in accelerators.items() if "/" in k}, 1.0)  # no templates: limits only


def test_a_dra_run_counts_device_seconds_under_its_device_class_and_its_waste():
    first = account(RUNNING, RUNNING, pods(dra_pod("w0", "a", 10)), [], at(20), TEMPLATES)
    assert first["usage"]["open"]["a"]["accelerators"] == {GPU_CLASS: 2}
    failed = dra_pod("w0", "a", 10, 70, code=1)
    restarted = account(first, first, pods(failed), ["a"], at(71), TEMPLATES)
    assert restarted["usage"]["accelerators"] == {GPU_CLASS: 120}
    assert restarted["usage"]["wasted"] == {GPU_CLASS: 120}
    # what was asked when the run opened is what counts: a template gone later changes nothing
    assert account(first, first, pods(failed), ["a"], at(71), {})["usage"] == restarted["usage"]


def with_templates(observed: Observed, templates: Mapping[str, Obj]) -> Observed:
    return replace(observed, claim_templates=templates)


# -- through plan: the pods and the Workload carry the claims; usage counts them ----------------


def dra_job(queue: str | None = None) -> Obj:
    job = generic("train", ("worker", 2)) if queue is None else \
        generic("train", ("worker", 2), scheduler={"t9kScheduler": {"queue": queue}})  # fmt: skip
    spec = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    spec["resourceClaims"] = claims(("gpu", "two-gpus"))
    spec["containers"][0]["resources"] = {"limits": {"cpu": "1"}, "claims": [{"name": "gpu"}]}
    return job


def test_the_pods_keep_the_replicas_resource_claims():
    p = plan(dra_job(), Observed.of(), NOW)
    made = [a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod"]
    assert len(made) == 2
    for pod in made:
        assert pod["spec"]["resourceClaims"] == claims(("gpu", "two-gpus"))
        assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]


def test_the_workload_podset_carries_the_resource_claims_for_kueue():
    p = plan(dra_job("gpu"), Observed.of(queueing="kueue", local_queues=("gpu",)), NOW)
    workload = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Workload")
    template = workload["spec"]["podSets"][0]["template"]["spec"]
    assert template["resourceClaims"] == claims(("gpu", "two-gpus"))
    assert template["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    assert not any(isinstance(a, Create) and a.kind == "Pod" for a in p.actions)  # still no pod before admission


def test_a_job_without_claims_gets_a_podset_without_the_key():
    job = dra_job("gpu")
    del job["spec"]["replicaSpecs"][0]["template"]["spec"]["resourceClaims"]
    p = plan(job, Observed.of(queueing="kueue", local_queues=("gpu",)), NOW)
    workload = next(a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Workload")
    assert "resourceClaims" not in workload["spec"]["podSets"][0]["template"]["spec"]


@pytest.mark.parametrize("slim", [False, True], ids=["whole", "slim-cache"])
def test_a_dra_job_through_plan_counts_its_devices(slim):
    job = dra_job()
    job["spec"]["replicaSpecs"][0]["replicas"] = 1

    def go(status: Obj | None, now: float, *objects: Obj):
        j = copy.deepcopy(job)
        if status is not None:
            j["status"] = status
        objs = [slim_for(o["kind"])(copy.deepcopy(o)) if slim else o for o in objects]
        return plan(j, with_templates(Observed.of(*objs, evidence(j)), TEMPLATES), at(now))

    p = go(None, 0)
    p = go(p.status, 6, dra_pod("train-worker-0", "run1", 5))
    assert p.status["usage"]["open"]["run1"]["accelerators"] == {GPU_CLASS: 2}
    p = go(p.status, 36, dra_pod("train-worker-0", "run1", 5, 35))
    assert p.status["phase"] == "Succeeded"
    assert p.status["usage"]["accelerators"] == {GPU_CLASS: 60}
    assert p.status["usage"]["wasted"] == {GPU_CLASS: 0}


def test_the_slim_cache_keeps_a_pods_resource_claims():
    pod = dra_pod("p", "u", 0)
    pod["spec"]["volumes"] = [{"name": "v"}]
    slim = slim_for("Pod")(copy.deepcopy(pod))
    assert slim["spec"]["resourceClaims"] == pod["spec"]["resourceClaims"]
    assert "volumes" not in slim["spec"]
    assert ts(0) == slim["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
