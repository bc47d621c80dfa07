"""reconcile/push.py: every replica gets the progress endpoint's URL, CA and token (env, one
projected volume, the CA in the pod's annotation), for every kind that reports progress."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.controller.reconcile.actions import Create
from airflow_t9k.controller.reconcile.desired import build_pod, slots
from airflow_t9k.controller.reconcile.push import CA_ANNOTATION, MOUNT, URL_ANNOTATION, VOLUME, PushTarget, inject, push_env
from airflow_t9k.controller.slim import slim_for
from airflow_t9k.kinds.registry import KINDS
from tests.builders import NOW, colossal, generic, pytorch

Obj = dict[str, Any]
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
TARGET = PushTarget("https://10.88.0.1:8443", CA)


def env_of(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def test_the_env_under_our_names_and_kubeflow_trainers():
    env = push_env(TARGET, generic("train"))
    url = "https://10.88.0.1:8443/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/genericjobs/train/progress"
    assert env == {
        "T9K_PROGRESS_URL": url, "KUBEFLOW_TRAINER_SERVER_URL": url,
        "T9K_PROGRESS_CA_CERT": f"{MOUNT}/ca.crt", "KUBEFLOW_TRAINER_SERVER_CA_CERT": f"{MOUNT}/ca.crt",
        "T9K_PROGRESS_TOKEN": f"{MOUNT}/token", "KUBEFLOW_TRAINER_SERVER_TOKEN": f"{MOUNT}/token",
    }  # fmt: skip


def test_a_path_prefix_in_the_endpoint_is_kept_and_ascendjob_has_its_own_group():
    target = PushTarget("https://gw.example.com/t9k/", CA)
    job = {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob", "metadata": {"name": "a", "namespace": "ml"}}
    assert (
        push_env(target, job)["T9K_PROGRESS_URL"]
        == "https://gw.example.com/t9k/apis/mindxdl.gitee.com/v1/namespaces/ml/ascendjobs/a/progress"
    )


@pytest.mark.parametrize("job", [generic("g", ("worker", 2)), pytorch("p", ("master", 1), ("worker", 1)), colossal("c", 2)],
                         ids=["generic", "pytorch", "colossalai"])  # fmt: skip
def test_every_container_of_every_replica_gets_them(job):
    kind = KINDS[job["kind"]]
    for slot in slots(kind, job):
        pod = build_pod(kind, job, slot, 0, False, push=TARGET)
        spec = pod["spec"]
        assert pod["metadata"]["annotations"][CA_ANNOTATION] == CA
        (vol,) = [v for v in spec["volumes"] if v["name"] == VOLUME]
        token, ca = vol["projected"]["sources"]
        assert token == {"serviceAccountToken": {"audience": "airflow-t9k-progress", "expirationSeconds": 3600,
                                                 "path": "token"}}  # fmt: skip
        ca_field, url_field = (f"metadata.annotations['{a}']" for a in (CA_ANNOTATION, URL_ANNOTATION))
        assert ca == {"downwardAPI": {"items": [{"path": "ca.crt", "fieldRef": {"fieldPath": ca_field}},
                                                {"path": "url", "fieldRef": {"fieldPath": url_field}}]}}  # fmt: skip
        # The URL as a file too: ranks a launcher starts over SSH do not inherit the container's env.
        assert pod["metadata"]["annotations"][URL_ANNOTATION] == push_env(TARGET, job)["T9K_PROGRESS_URL"]
        for c in spec["containers"]:
            assert env_of(c)["KUBEFLOW_TRAINER_SERVER_URL"].endswith(f"/{job['metadata']['name']}/progress")
            assert {"name": VOLUME, "mountPath": MOUNT, "readOnly": True} in c["volumeMounts"]
        for c in spec.get("initContainers") or []:
            assert "T9K_PROGRESS_URL" not in env_of(c)


def test_the_controllers_values_replace_a_templates():
    job = generic("g", ("worker", 1))
    template = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    template["containers"][0]["env"] = [{"name": "T9K_PROGRESS_URL", "value": "https://evil"}, {"name": "KEEP", "value": "1"}]
    template["containers"][0]["volumeMounts"] = [{"name": VOLUME, "mountPath": "/elsewhere"}]
    template["volumes"] = [{"name": VOLUME, "emptyDir": {}}, {"name": "data", "emptyDir": {}}]
    pod = build_pod(KINDS["GenericJob"], job, slots(KINDS["GenericJob"], job)[0], 0, False, push=TARGET)
    c = pod["spec"]["containers"][0]
    assert env_of(c)["T9K_PROGRESS_URL"].startswith("https://10.88.0.1:8443/")
    assert env_of(c)["KEEP"] == "1"
    assert [e["name"] for e in c["env"]].count("T9K_PROGRESS_URL") == 1
    assert c["volumeMounts"] == [{"name": VOLUME, "mountPath": MOUNT, "readOnly": True}]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["data", VOLUME]
    assert "projected" in pod["spec"]["volumes"][1]


def test_nothing_without_the_push_path_or_for_a_kind_without_progress():
    job = generic("g", ("worker", 1))
    pod = build_pod(KINDS["GenericJob"], job, slots(KINDS["GenericJob"], job)[0], 0, False)
    assert CA_ANNOTATION not in pod["metadata"]["annotations"]
    assert "T9K_PROGRESS_URL" not in env_of(pod["spec"]["containers"][0])
    beam = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "BeamJob", "metadata": {"name": "b", "namespace": "ns"}}
    pod = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
    inject(KINDS["BeamJob"], beam, pod, TARGET)
    assert pod == {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}


def created_pods(actions: Any) -> list[Obj]:
    return [a.manifest for a in actions if isinstance(a, Create) and a.kind == "Pod"]


def test_the_pass_creates_pods_with_them_and_the_cache_keeps_no_copy_of_the_ca():
    job = generic("g", ("worker", 2))
    result = plan(job, Observed(progress_push=TARGET), NOW)
    pods = created_pods(result.actions)
    assert len(pods) == 2
    assert all(p["metadata"]["annotations"][CA_ANNOTATION] == CA for p in pods)
    assert all("T9K_PROGRESS_TOKEN" in env_of(p["spec"]["containers"][0]) for p in pods)
    cached = slim_for("Pod")(pods[0])
    assert CA_ANNOTATION not in cached["metadata"]["annotations"]
    assert URL_ANNOTATION not in cached["metadata"]["annotations"]
    assert "batch.tensorstack.dev/restart-count" in cached["metadata"]["annotations"]
    # A renewed CA reaches the pods created after it.
    later = created_pods(plan(job, Observed(progress_push=replace(TARGET, ca_pem=CA + CA)), NOW).actions)
    assert len(later) == 2
    assert all(p["metadata"]["annotations"][CA_ANNOTATION] == CA + CA for p in later)


def _with_sidecar(job: Obj, automount: bool | None = None, **notes: str) -> Obj:
    spec = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    spec["containers"].append({"name": "log-shipper", "image": "fluent-bit"})
    if automount is not None:
        spec["automountServiceAccountToken"] = automount
    job["metadata"]["annotations"] = notes
    return job


# Issue 45, item 6: the token only where the training runs, and never where the author said no token.
@pytest.mark.parametrize(
    ("automount", "notes", "with_token"),
    [(None, {}, {"main"}),  # a sidecar holds no credential of the job
     (True, {}, {"main"}),
     (None, {"batch.tensorstack.dev/progress-containers": "main, log-shipper"}, {"main", "log-shipper"}),
     (None, {"batch.tensorstack.dev/progress-containers": "log-shipper"}, {"log-shipper"}),
     (False, {}, set()),  # the template asked for no token in the pod
     (False, {"batch.tensorstack.dev/progress-token": "mount"}, {"main"}),  # unless the job opts in
     (False, {"batch.tensorstack.dev/progress-token": "yes"}, set())],
    ids=["default", "automount", "named-both", "named-sidecar", "no-automount", "opted-in", "not-the-word"],
)  # fmt: skip
def test_the_token_goes_only_to_the_reporting_containers(automount, notes, with_token):
    job = _with_sidecar(generic("g", ("worker", 1)), automount, **notes)
    kind = KINDS["GenericJob"]
    (slot,) = slots(kind, job)
    pod = build_pod(kind, job, slot, 0, False, push=TARGET)
    holders = {c["name"] for c in pod["spec"]["containers"]
               if any(m["name"] == VOLUME for m in c.get("volumeMounts") or []) or "T9K_PROGRESS_TOKEN" in env_of(c)}  # fmt: skip
    assert holders == with_token
    has_volume = any(v["name"] == VOLUME for v in pod["spec"].get("volumes") or [])
    assert has_volume is bool(with_token)


@pytest.mark.parametrize(
    "forged",
    ["batch.tensorstack.dev/in-place-restarts", "batch.tensorstack.dev/group-restart", "batch.tensorstack.dev/progress-ca",
     "batch.tensorstack.dev/progress-url", "batch.tensorstack.dev/restart-count"],
)  # fmt: skip
def test_a_template_cannot_set_the_controllers_own_annotations(forged):
    """Issue 45, item 6: a template annotation ``in-place-restarts: "99"`` pre-authorized 99
    in-place restarts; one of the progress CA or URL pointed the replica at another endpoint."""
    job = generic("g", ("worker", 1))
    job["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"annotations": {forged: "99", "team.example.com/owner": "ml"}}
    kind = KINDS["GenericJob"]
    (slot,) = slots(kind, job)
    pod = build_pod(kind, job, slot, 0, False)
    notes = pod["metadata"]["annotations"]
    assert notes.get(forged) in (None, "0")  # gone, or the controller's own value (restart-count 0)
    assert notes["team.example.com/owner"] == "ml"  # the author's own annotations stay
