"""The UI's actions role amounts to creating pods (issue 45, item 3): it grants patch on the jobs,
pod templates are mutable, and new pods follow the current spec, so a stolen api-server token
could rewrite a template (image, service account, Secret mounts), pause and resume, and run its
code as any account of the namespace. The chart's ValidatingAdmissionPolicy, matched on the UI's
identity, lets it change only what the T9k Job tab's buttons change.

The chart is rendered as a user would (its UI Roles and the policy, the subjects set to a real
ServiceAccount of this test's namespace, names made unique); the policy then applies to that
account only, so nothing else on the shared cluster is affected."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client, utils
from kubernetes.client.exceptions import ApiException

from tests.kind_jobs import minimal
from tests.support.cluster import wait_until
from tests.support.rbac import account_client, delete_cluster_scoped

GROUP, VERSION, PLURAL = "batch.tensorstack.dev", "v1beta1", "genericjobs"


@pytest.fixture
def ui(api_client, cluster, core, namespace, crds, tmp_path):
    """(the UI identity's CustomObjectsApi, the policy's name)."""
    from tests.support.chart import render

    suffix = uuid.uuid4().hex[:6]
    sa = f"airflow-api-server-{suffix}"
    subject = {"kind": "ServiceAccount", "name": sa, "namespace": namespace}
    values = {"airflow.rbac.namespaces": [namespace], "airflow.rbac.ui.subjects": [subject], "crds.install": False}
    docs = [o for o in render(values) if o["metadata"]["name"].startswith("airflow-t9k-ui-")]
    assert {o["kind"] for o in docs} == {"Role", "RoleBinding", "ValidatingAdmissionPolicy",
                                         "ValidatingAdmissionPolicyBinding"}, docs  # fmt: skip
    for o in docs:
        o["metadata"]["name"] = o["metadata"]["name"].replace("airflow-t9k-ui-", f"airflow-t9k-ui-{suffix}-")
        for ref in ("roleRef", "spec"):
            target = o.get(ref) or {}
            for key in ("name", "policyName"):
                if isinstance(target.get(key), str):
                    target[key] = target[key].replace("airflow-t9k-ui-", f"airflow-t9k-ui-{suffix}-")
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    utils.create_from_yaml(api_client, yaml_objects=docs)
    ui = account_client(core, cluster.kubeconfig, namespace, sa, tmp_path / "kubeconfig-ui")
    policy = next(o["metadata"]["name"] for o in docs if o["kind"] == "ValidatingAdmissionPolicy")
    try:
        yield client.CustomObjectsApi(ui), policy
    finally:
        delete_cluster_scoped(api_client, docs)


def _patch(api: client.CustomObjectsApi, ns: str, name: str, body: dict) -> str | None:
    """None when the patch went through, else the refusal."""
    try:
        api.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, body)
    except ApiException as exc:
        return f"{exc.status} {exc.body}"
    return None


ATTACKS = {
    "image": lambda uid: {"spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": {"spec": {
        "containers": [{"name": "main", "image": "attacker/miner"}]}}}]}},
    "service account": lambda uid: {"spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": {"spec": {
        "serviceAccountName": "admin", "containers": [{"name": "main", "image": "busybox"}]}}}]}},
    "run mode": lambda uid: {"spec": {"runMode": {"debug": {"enabled": True}}}},
    "replicas": lambda uid: {"spec": {"replicaSpecs": [{"type": "worker", "replicas": 9, "template": {"spec": {
        "containers": [{"name": "main", "image": "busybox"}]}}}]}},  # Scale is the scale subresource's
    "finalizer": lambda uid: {"metadata": {"finalizers": ["example.com/hold"]}},
    "label": lambda uid: {"metadata": {"labels": {"airflow-t9k.io/task-id": "someone-else"}}},
    "annotation": lambda uid: {"metadata": {"annotations": {"airflow-t9k.io/run-id": "forged"}}},
}  # fmt: skip


def test_the_ui_identity_may_pause_and_resume_and_nothing_else(ui, jobs, namespace):
    api, policy = ui
    # A new policy takes effect within a moment (its type check and informer sync): a probe job's
    # label, a new value each time, is changed until the policy refuses it.
    probe = minimal("GenericJob", f"probe-{uuid.uuid4().hex[:6]}")
    probe["metadata"].pop("uid", None)
    probe_name = jobs.create(probe)["metadata"]["name"]
    wait_until(lambda: _patch(api, namespace, probe_name, {"metadata": {"labels": {"probe": uuid.uuid4().hex[:8]}}}),
               timeout=30, what="the policy in effect")  # fmt: skip
    job = minimal("GenericJob", f"j-{uuid.uuid4().hex[:6]}")
    job["metadata"].pop("uid", None)
    name = jobs.create(job)["metadata"]["name"]
    uid = jobs.get("GenericJob", name)["metadata"]["uid"]

    refused = {what: _patch(api, namespace, name, attack(uid)) for what, attack in ATTACKS.items()}
    assert {w: r for w, r in refused.items() if r is None} == {}, "the UI's identity changed what it may not"
    assert all(r and r.startswith("403") and policy in r for r in refused.values()), refused
    # What the tab's buttons send (airflow_t9k/ui/reader.py, api/runmode.py): pause by hand, a
    # task's pause with its mark, and resume clearing it.
    assert _patch(api, namespace, name, {"metadata": {"uid": uid}, "spec": {"runMode": {"pause": {"enabled": True}}}}) is None
    assert _patch(api, namespace, name, {"metadata": {"uid": uid, "annotations": {"airflow-t9k.io/paused-by": "kill of try 1"}},
                                         "spec": {"runMode": {"pause": {"enabled": True}}}}) is None  # fmt: skip
    assert _patch(api, namespace, name, {"metadata": {"uid": uid, "annotations": {"airflow-t9k.io/paused-by": None}},
                                         "spec": {"runMode": {"pause": {"enabled": False}}}}) is None  # fmt: skip
    now = jobs.get("GenericJob", name)
    assert now["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] == job["spec"]["replicaSpecs"][0][
        "template"]["spec"]["containers"][0]["image"]  # fmt: skip
    # Delete is RBAC's to bound (the tab's Delete): the policy does not see it.
    api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def test_other_identities_are_not_bound_by_the_ui_policy(ui, jobs, namespace):
    _, _policy = ui
    job = minimal("GenericJob", f"k-{uuid.uuid4().hex[:6]}")
    job["metadata"].pop("uid", None)
    name = jobs.create(job)["metadata"]["name"]
    # The test's own identity (an admin, as a DAG author's worker would be for its jobs) edits a template.
    jobs.patch("GenericJob", name, {"metadata": {"labels": {"edited": "yes"}}})
    assert jobs.get("GenericJob", name)["metadata"]["labels"]["edited"] == "yes"
