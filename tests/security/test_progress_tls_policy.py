"""The controller's admission policy and the push endpoint's TLS Secret (docs/progress.md, "TLS"):
the controllers keep that one Secret in the release's namespace, which the policy otherwise keeps
them out of. The chart's policy is rendered as a user would render it, for a release in this
test's namespace whose controller runs as a real ServiceAccount given the chart's Role for the
Secret plus create and update on every Secret in scope (as a leaked token of the cluster-wide
scopes would have): it may create and update that Secret by its name, and no other Secret, there or
in a namespace it serves. Matched on that account only: nothing else on the shared cluster is
affected."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client, utils

from tests.support.chart import render
from tests.support.cluster import wait_until
from tests.support.rbac import account_client, delete_cluster_scoped, refusal

SECRET = "airflow-t9k-controller-progress-certs"


@pytest.fixture
def controller_identity(api_client, cluster, core, namespace, tmp_path):
    """(the identity's CoreV1Api, a namespace in its scope, the policy's name)."""
    suffix = uuid.uuid4().hex[:6]
    sa = f"ctl-{suffix}"
    label = f"sec-{suffix}.airflow-t9k.io/jobs"
    values = {"serviceAccount.create": False, "serviceAccount.name": sa, "scope.selector": f"{label}=enabled",
              "scope.exclude": [], "crds.install": False}  # fmt: skip
    objs = render(values, namespace=namespace)
    docs = [o for o in objs if o["kind"].startswith("ValidatingAdmissionPolicy")
            and o["metadata"]["name"] == "airflow-t9k-controller-writes"]  # fmt: skip
    (role,) = [o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == "airflow-t9k-controller-progress-tls"]
    name = f"airflow-t9k-{suffix}-controller-writes"
    for o in docs:
        o["metadata"]["name"] = name
        if "policyName" in o["spec"]:
            o["spec"]["policyName"] = name
    wide = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]},
    ]  # fmt: skip
    inside = f"t9k-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": inside, "labels": {"airflow-t9k/test": "true", label: "enabled"}}})
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    role["metadata"]["namespace"] = namespace
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "progress-tls", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]},
               "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]}  # fmt: skip
    utils.create_from_yaml(api_client, yaml_objects=[*wide, *docs, role, binding])
    ctl = account_client(core, cluster.kubeconfig, namespace, sa, tmp_path / "kubeconfig-controller")
    try:
        yield client.CoreV1Api(ctl), inside, name
    finally:
        delete_cluster_scoped(api_client, wide + docs)
        core.delete_namespace(inside)


def test_the_controller_may_keep_its_tls_secret_and_no_other(controller_identity, core, namespace):
    ctl, inside, policy = controller_identity

    def probe() -> str | None:  # a new policy takes effect within a moment
        return refusal(lambda: ctl.create_namespaced_secret(namespace, {"metadata": {"name": f"p-{uuid.uuid4().hex[:6]}"}}))

    wait_until(probe, timeout=30, what="the policy in effect")
    refused = {
        "another Secret in the release's namespace": probe(),
        "its Secret's name in a namespace it serves": refusal(
            lambda: ctl.create_namespaced_secret(inside, {"metadata": {"name": SECRET}})),
        "a loose Secret in a namespace it serves": refusal(
            lambda: ctl.create_namespaced_secret(inside, {"metadata": {"name": "loose"}})),
    }  # fmt: skip
    assert {w: r for w, r in refused.items() if r is None} == {}, "the controller's identity wrote a Secret it may not"
    assert all(r and r.startswith("403") and policy in r for r in refused.values()), refused

    # What the controllers do: create it (when gone), read it, write it from what they read.
    assert refusal(lambda: ctl.create_namespaced_secret(namespace, {"metadata": {"name": SECRET}, "type": "Opaque"})) is None
    secret = ctl.read_namespaced_secret(SECRET, namespace)
    secret.data = {"ca.crt": "Y2E="}
    assert refusal(lambda: ctl.replace_namespaced_secret(SECRET, namespace, secret)) is None
    # RBAC's side: no read of another Secret in the release's namespace (the Role names one).
    core.create_namespaced_secret(namespace, {"metadata": {"name": "someone-elses"}, "stringData": {"k": "v"}})
    read = refusal(lambda: ctl.read_namespaced_secret("someone-elses", namespace))
    assert read is not None
    assert read.startswith("403"), read
