"""The controller's own identity (issue 45, item 4): its rights are cluster-wide in the selector
and all scopes (pods create, delete and patch, ConfigMaps patch, Services, Secrets create), so a
leaked controller token could patch kube-system's ConfigMaps or any pod. The chart's
ValidatingAdmissionPolicy on that identity refuses writes out of scope, writes to objects with no
controller reference to a T9k job, and changes of a pod's spec.

The chart's policy is rendered as a user would render it, for a release in this test's namespace
whose controller runs as a real ServiceAccount given cluster-wide rights like the controller's;
its scope is a label only this test sets. The policy then matches that account only, so nothing
else on the shared cluster is affected. The deployed controller runs under the policy in
tests/deploy (every job kind's pods made, patched and deleted by it there)."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client, utils

from tests.kind_jobs import minimal
from tests.support.cluster import wait_until
from tests.support.rbac import account_client, delete_cluster_scoped, refusal


@pytest.fixture
def identity(api_client, cluster, core, namespace, crds, tmp_path):
    """(the controller identity's CoreV1Api, the namespace in scope, one out of scope, the policy's name)."""
    from tests.support.chart import render

    suffix = uuid.uuid4().hex[:6]
    sa = f"ctl-{suffix}"
    label = f"sec-{suffix}.airflow-t9k.io/jobs"
    values = {"serviceAccount.create": False, "serviceAccount.name": sa, "scope.selector": f"{label}=enabled",
              "scope.exclude": [], "crds.install": False}  # fmt: skip
    docs = [o for o in render(values, namespace=namespace) if o["kind"].startswith("ValidatingAdmissionPolicy")
            and o["metadata"]["name"] == "airflow-t9k-controller-writes"]  # fmt: skip
    assert len(docs) == 2, docs
    name = f"airflow-t9k-{suffix}-controller-writes"
    for o in docs:
        o["metadata"]["name"] = name
        if "policyName" in o["spec"]:
            o["spec"]["policyName"] = name
    rights = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [{"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "create", "patch", "delete"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]},
    ]  # fmt: skip
    inside, outside = (f"t9k-test-{uuid.uuid4().hex[:8]}" for _ in range(2))
    core.create_namespace({"metadata": {"name": inside, "labels": {"airflow-t9k/test": "true", label: "enabled"}}})
    core.create_namespace({"metadata": {"name": outside, "labels": {"airflow-t9k/test": "true"}}})
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    utils.create_from_yaml(api_client, yaml_objects=rights + docs)
    ctl = account_client(core, cluster.kubeconfig, namespace, sa, tmp_path / "kubeconfig-controller")
    try:
        yield client.CoreV1Api(ctl), inside, outside, name
    finally:
        delete_cluster_scoped(api_client, rights + docs)
        for ns in (inside, outside):
            core.delete_namespace(ns)


def _pod(name: str, owner: dict | None) -> dict:
    meta: dict = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta, "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def test_the_controllers_identity_writes_only_its_jobs_children_in_scope(identity, api_client, core):
    ctl, inside, outside, policy = identity

    # A new policy takes effect within a moment: a ConfigMap out of scope, a new name each time.
    def probe() -> str | None:
        return refusal(lambda: ctl.create_namespaced_config_map(outside, {"metadata": {"name": f"p-{uuid.uuid4().hex[:6]}"}}))

    wait_until(probe, timeout=30, what="the policy in effect")
    job = minimal("GenericJob", "owner")
    job["metadata"].pop("uid", None)
    job["metadata"].pop("namespace", None)
    job = client.CustomObjectsApi(api_client).create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", inside,
                                                                              "genericjobs", job)  # fmt: skip
    owner = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "name": "owner",
             "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    core.create_namespaced_config_map(inside, {"metadata": {"name": "team-config"}, "data": {"k": "v"}})
    core.create_namespaced_pod(inside, _pod("someones", None))

    refused = {
        "a ConfigMap of kube-system": refusal(lambda: ctl.patch_namespaced_config_map(
            "kube-root-ca.crt", "kube-system", {"metadata": {"labels": {"x": "y"}}}, dry_run="All")),
        "a child of a job out of scope": refusal(lambda: ctl.create_namespaced_pod(outside, _pod("forged", owner))),
        "a pod with no job": refusal(lambda: ctl.create_namespaced_pod(inside, _pod("loose", None))),
        "a team's ConfigMap": refusal(lambda: ctl.patch_namespaced_config_map("team-config", inside, {"data": {"k": "x"}})),
        "deleting a team's ConfigMap": refusal(lambda: ctl.delete_namespaced_config_map("team-config", inside)),
        "deleting someone's pod": refusal(lambda: ctl.delete_namespaced_pod("someones", inside)),
    }  # fmt: skip
    assert {w: r for w, r in refused.items() if r is None} == {}, "the controller's identity wrote what it may not"
    assert all(r and r.startswith("403") and policy in r for r in refused.values()), refused

    # What the controller does: a replica of its job, its annotations patched, its deletion.
    assert refusal(lambda: ctl.create_namespaced_pod(inside, _pod("owner-worker-0", owner))) is None
    assert refusal(lambda: ctl.patch_namespaced_pod("owner-worker-0", inside,
                                                  {"metadata": {"annotations": {"restart": "1"}}})) is None  # fmt: skip
    image = refusal(lambda: ctl.patch_namespaced_pod("owner-worker-0", inside, {"spec": {"containers": [
        {"name": "main", "image": "attacker/miner"}]}}))  # fmt: skip
    assert image is not None, "the controller's identity changed a pod's image"
    assert image.startswith("403"), image
    assert "changes no pod's spec" in image, image
    assert refusal(lambda: ctl.delete_namespaced_pod("owner-worker-0", inside)) is None
    assert core.read_namespaced_config_map("team-config", inside).data == {"k": "v"}
