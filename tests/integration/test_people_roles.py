"""The chart's roles for people (templates/rbac-people.yaml; docs/install.md, "Roles for people"),
folded into Kubernetes' own `view` and `edit` ClusterRoles by the real kube-controller-manager:
a ServiceAccount bound to nothing but the built-in `edit` in a namespace lists and submits
PyTorchTrainingJobs there and nowhere else, and writes no job's status; one bound to `view` reads
them and is refused every write; and the chart's job admission policy refuses an editor's
escaping job as it refuses Airflow's (issue 46, item 4).

The roles are rendered under a release name of the test's own (unique ClusterRole names) and
removed afterwards. Aggregation is cluster-wide: another release's roles for people in the cluster
(`make deploy-local`'s) would grant the same, and the test says so rather than prove nothing."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.builders import pytorch
from tests.security.test_admission import _effective, attacked, policy  # noqa: F401 - the policy fixture
from tests.support.chart import by_kind, granted, render
from tests.support.cluster import wait_until
from tests.support.jobs import Jobs
from tests.support.rbac import account_client

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

KIND, PLURAL, GROUP, VERSION = "PyTorchTrainingJob", "pytorchtrainingjobs", "batch.tensorstack.dev", "v1beta1"
AGGREGATE_TO_EDIT = "rbac.authorization.k8s.io/aggregate-to-edit=true"
AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view=true"


def _grants(rbac: client.RbacAuthorizationV1Api, role: str, verb: str) -> bool:
    rules = rbac.api_client.sanitize_for_serialization(rbac.read_cluster_role(role).rules or [])
    return (GROUP, PLURAL, verb, "*") in granted(rules)


@pytest.fixture(scope="module")
def people_roles(api_client, crds) -> Iterator[list[str]]:
    """The chart's two roles for people, as the chart renders them, in the cluster (once for the
    module: the aggregation is cluster-wide, so its tests share one worker)."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    others = [r.metadata.name for label in (AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW)
              for r in rbac.list_cluster_role(label_selector=label).items
              if r.aggregation_rule is None and any(PLURAL in (rule.resources or []) for rule in r.rules or [])]  # fmt: skip
    assert not others, f"roles for people of another release are installed ({others}): uninstall it (make undeploy-local)"
    roles = [r for r in by_kind(render({"crds.install": False}, release=f"people-{uuid.uuid4().hex[:6]}"), "ClusterRole")
             if r["metadata"]["name"].endswith(("-job-viewer", "-job-editor"))]  # fmt: skip
    assert len(roles) == 2
    for role in roles:
        rbac.create_cluster_role(role)
    try:
        # kube-controller-manager's clusterrole-aggregation controller copies the rules over.
        wait_until(lambda: _grants(rbac, "edit", "create") and _grants(rbac, "view", "list"), timeout=30,
                   what="the roles for people aggregated into edit and view")  # fmt: skip
        assert not _grants(rbac, "view", "create")
        yield [r["metadata"]["name"] for r in roles]
    finally:
        for role in roles:
            rbac.delete_cluster_role(role["metadata"]["name"])


def _person(api_client, core, cluster, namespace: str, role: str | None, tmp_path: Path) -> client.ApiClient:
    """A ServiceAccount standing for a person, bound to the built-in ClusterRole ``role`` in ``namespace`` only."""
    name = f"{role or 'nobody'}-{uuid.uuid4().hex[:4]}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    if role:
        client.RbacAuthorizationV1Api(api_client).create_namespaced_role_binding(namespace, {
            "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})  # fmt: skip
    return account_client(core, cluster.kubeconfig, namespace, name, tmp_path / f"{name}.kubeconfig")


def _status(call: Any) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def _job(name: str) -> dict[str, Any]:
    job = pytorch(name, ("master", 1))
    for k in ("namespace", "uid", "generation"):
        job["metadata"].pop(k)
    return job


def test_edit_submits_and_view_reads_t9k_jobs_in_their_namespace_only(api_client, core, cluster, namespace, people_roles,
                                                                       tmp_path):  # fmt: skip
    editor = Jobs(_person(api_client, core, cluster, namespace, "edit", tmp_path), namespace)
    viewer = Jobs(_person(api_client, core, cluster, namespace, "view", tmp_path), namespace)
    nobody = Jobs(_person(api_client, core, cluster, namespace, None, tmp_path), namespace)
    listing = (GROUP, VERSION, namespace, PLURAL)

    # Without either role nothing is granted: what follows comes from the aggregation.
    assert _status(lambda: nobody.api.list_namespaced_custom_object(*listing)) == 403
    assert _status(lambda: editor.api.list_namespaced_custom_object(*listing)) == 200
    assert _status(lambda: viewer.api.list_namespaced_custom_object(*listing)) == 200
    assert _status(lambda: viewer.create(_job("by-viewer"))) == 403

    created = editor.create(_job("by-editor"))
    assert created["metadata"]["name"] == "by-editor"
    assert viewer.get(KIND, "by-editor")["metadata"]["uid"] == created["metadata"]["uid"]
    assert _status(lambda: viewer.patch(KIND, "by-editor", {"metadata": {"labels": {"team": "a"}}})) == 403
    assert _status(lambda: viewer.delete(KIND, "by-editor")) == 403
    assert _status(lambda: editor.patch(KIND, "by-editor", {"metadata": {"labels": {"team": "a"}}})) == 200
    # A job's status is the controller's: edit writes none.
    body = {"status": {"phase": "Succeeded"}}
    assert _status(lambda: editor.api.patch_namespaced_custom_object_status(*listing, "by-editor", body)) == 403
    # The binding is the namespace's: nothing elsewhere.
    assert _status(lambda: editor.api.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)) == 403
    assert _status(lambda: Jobs(editor.api.api_client, "default").create(_job("elsewhere"))) == 403
    assert _status(lambda: editor.delete(KIND, "by-editor")) == 200


def test_the_job_admission_policy_refuses_an_editors_escaping_job(api_client, core, cluster, namespace, jobs, policy,
                                                                  people_roles, tmp_path):  # fmt: skip
    """admissionPolicy.enabled binds every requester: edit on jobs does not get past it."""
    _effective(jobs)
    editor = Jobs(_person(api_client, core, cluster, namespace, "edit", tmp_path), namespace)
    with pytest.raises(ApiException) as refused:
        editor.create(attacked(KIND, "hostPath"))
    assert refused.value.status == 403, refused.value.body
    assert policy in str(refused.value.body)
    assert "hostPath" in str(refused.value.body)
    ordinary = _job("ordinary")
    ordinary["spec"]["replicaSpecs"][0]["template"]["spec"]["serviceAccountName"] = "default"
    assert editor.create(ordinary)["metadata"]["name"] == "ordinary"
