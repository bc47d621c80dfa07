"""The CRDs we print and the deploy manifests we ship."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from airflow_t9k.api.resources import RESOURCES, TEMPLATE_RESOURCES
from airflow_t9k.cli import main
from airflow_t9k.controller.cli import crd_is_ours
from airflow_t9k.controller.crds import all_crds, template_crds

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def test_every_kind_has_a_crd_with_status_printer_columns_and_our_label(capsys):
    assert main(["crds"]) == 0
    # libyaml's parser when there (the pure-Python one takes 8 s over these 2.5 MB of schemas).
    printed = list(yaml.load_all(capsys.readouterr().out, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    assert printed == all_crds() + template_crds()
    assert sorted(c["spec"]["names"]["kind"] for c in all_crds()) == sorted(RESOURCES)
    assert [c["spec"]["scope"] for c in template_crds()] == ["Namespaced", "Cluster"]
    assert all(c["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "airflow-t9k" for c in template_crds())
    for crd in all_crds():
        version = crd["spec"]["versions"][0]
        assert version["subresources"]["status"] == {}
        first = "State" if crd["spec"]["names"]["kind"] == "AscendJob" else "Phase"  # Kubeflow-style status
        assert next(c["name"] for c in version["additionalPrinterColumns"]) == first
        assert crd["spec"]["names"]["shortNames"]
        assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "airflow-t9k"
        assert crd["metadata"]["labels"]["app.kubernetes.io/part-of"] == "airflow-t9k"
        schema = version["schema"]["openAPIV3Schema"]
        assert schema["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True


@pytest.mark.parametrize(
    ("labels", "ours"),
    [
        ({"app.kubernetes.io/managed-by": "airflow-t9k", "app.kubernetes.io/part-of": "airflow-t9k"}, True),  # airflow-t9k crds
        ({"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "airflow-t9k"}, True),  # the Helm chart
        ({"app.kubernetes.io/managed-by": "airflow-t9k"}, True),  # applied before part-of was added
        ({"app.kubernetes.io/managed-by": "Helm"}, False),  # another chart's CRDs of the same names
        ({"app.kubernetes.io/managed-by": "t9k-platform"}, False),
        ({}, False),
    ],
)
def test_the_controller_knows_its_crds_by_their_labels(labels, ours):
    assert crd_is_ours(labels) is ours


def _rules(name: str) -> list[dict]:
    docs = list(yaml.safe_load_all((DEPLOY / name).read_text()))
    return [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]


def test_namespace_rbac_grants_the_same_rules_as_the_cluster_rbac():
    def key(rule):
        return (tuple(rule["apiGroups"]), tuple(rule["resources"]), tuple(rule["verbs"]), tuple(rule.get("resourceNames", ())))

    assert sorted(map(key, _rules("rbac-namespace.yaml"))) == sorted(map(key, _rules("rbac-cluster.yaml")))


def test_rbac_covers_every_kind_and_its_status_in_both_variants():
    for name in ("rbac-cluster.yaml", "rbac-namespace.yaml"):
        granted = {
            (group, res, verb) for r in _rules(name) for group in r["apiGroups"] for res in r["resources"] for verb in r["verbs"]
        }
        crds = {n for r in _rules(name) for n in r.get("resourceNames", ())}
        for res in RESOURCES.values():
            assert {(res.group, res.plural, v) for v in ("get", "list", "watch")} <= granted, (name, res.kind)
            assert (res.group, f"{res.plural}/status", "patch") in granted, (name, res.kind)
            assert res.crd_name in crds, (name, res.kind)
        for res in TEMPLATE_RESOURCES.values():  # job templates: read, in every variant (docs/templates.md)
            assert {(res.group, res.plural, v) for v in ("get", "list", "watch")} <= granted, (name, res.kind)
            assert res.crd_name in crds, (name, res.kind)
        # BeamJob's submit job is a batch/v1 Job, created and (with its pods) watched by the controller.
        assert {("batch", "jobs", v) for v in ("get", "list", "watch", "create", "delete")} <= granted, name
        # Kueue (docs/queueing.md): a queued job's Workload, its status, and what admission reads.
        assert {("kueue.x-k8s.io", "workloads", v) for v in ("get", "list", "watch", "create", "delete")} <= granted, name
        assert ("kueue.x-k8s.io", "workloads/status", "update") in granted, name
        assert ("kueue.x-k8s.io", "workloads", "update") not in granted, name  # the spec is Kueue's once created
        reads = [
            ("kueue.x-k8s.io", "localqueues"),
            ("kueue.x-k8s.io", "resourceflavors"),
            ("kueue.x-k8s.io", "workloadpriorityclasses"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("resource.k8s.io", "resourceclaimtemplates"),  # DRA devices counted (docs/usage.md)
        ]
        assert {(g, r, v) for g, r in reads for v in ("get", "list", "watch")} <= granted, name
        assert not {(g, r, v) for g, r in reads for v in ("create", "update", "patch", "delete")} & granted, name
        # In-place restarts (docs/disruptions.md): pods' annotations patched; nodes listed once, never written.
        assert ("", "pods", "patch") in granted, name
        assert ("", "configmaps", "patch") in granted, name  # the hostfile after a rescale (steps/children.py)
        assert {("", "nodes", "list"), ("", "nodes", "watch")} <= granted, name  # and watched: bad nodes avoided
        assert not {("", "nodes", v) for v in ("get", "create", "update", "patch", "delete")} & granted, name
        # Gang scheduling without add-ons (docs/queueing.md): a job's own PodGroup.
        assert {("scheduling.k8s.io", "podgroups", v) for v in ("get", "list", "watch", "create", "delete")} <= granted, name


def test_rbac_is_least_privilege():
    for rule in _rules("rbac-cluster.yaml"):
        assert "*" not in rule["verbs"]
        assert "*" not in rule["resources"]
        if rule["apiGroups"] in (["batch.tensorstack.dev"], ["mindxdl.gitee.com"]) and not any(
            "/" in r for r in rule["resources"]
        ):
            if set(rule["resources"]) & {"t9kjobtemplates", "clustert9kjobtemplates"}:
                assert set(rule["verbs"]) == {"get", "list", "watch"}  # job templates are only read
                continue
            # Jobs are written only to merge a job template into their spec, once (docs/templates.md):
            # update, never create, patch or delete.
            assert set(rule["verbs"]) == {"get", "list", "watch", "update"}
            continue
        if rule["resources"] == ["pods"] and rule["apiGroups"] == [""] and set(rule["verbs"]) == {"patch"}:
            continue  # in-place restarts: the pod's annotations, nothing else (docs/disruptions.md)
        if rule["resources"] == ["configmaps"] and rule["apiGroups"] == [""] and set(rule["verbs"]) == {"patch"}:
            continue  # a DeepSpeed Elastic job's hostfile, rewritten after a rescale (steps/children.py)
        if rule["resources"] == ["leases"]:  # leader election: update only its own Lease
            assert rule["apiGroups"] == ["coordination.k8s.io"]
            assert set(rule["verbs"]) == {"create"} or rule.get("resourceNames") == ["airflow-t9k-controller"]
            continue
        assert not {"update", "patch"} & set(rule["verbs"]) or all("/" in r or r == "events" for r in rule["resources"])


def test_deployment_runs_non_root_with_a_liveness_probe():
    dep = next(d for d in yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text()) if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    container = pod["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"  # readiness is the caches, liveness is not
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["serviceAccountName"] == "airflow-t9k-controller"


def test_deployment_runs_two_replicas_with_leader_election_and_rbac_for_its_lease():
    dep = next(d for d in yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text()) if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 2
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert "--leader-elect" in container["command"] + container["args"]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]
    for name in ("rbac-cluster.yaml", "rbac-namespace.yaml"):
        docs = list(yaml.safe_load_all((DEPLOY / name).read_text()))
        role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("leader-election"))
        assert role["metadata"]["namespace"] == dep["metadata"]["namespace"]
        granted = {(v, n) for r in role["rules"] for v in r["verbs"] for n in r.get("resourceNames", ["*"])}
        assert granted == {("create", "*"), ("get", "airflow-t9k-controller"), ("update", "airflow-t9k-controller")}
        binding = next(d for d in docs if d["kind"] == "RoleBinding" and d["roleRef"]["name"] == role["metadata"]["name"])
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "airflow-t9k-controller", "namespace": "airflow-t9k-system"}
        ]


def test_debug_logging_keeps_the_client_library_quiet(monkeypatch):
    import logging

    from airflow_t9k.controller import cli as controller_cli

    monkeypatch.setattr(controller_cli, "main_async", lambda args: _done())
    root, client_logger = logging.getLogger(), logging.getLogger("kubernetes_asyncio")
    saved = root.level, client_logger.level
    root.setLevel(logging.DEBUG)  # what --log-level DEBUG does where basicConfig has run before
    client_logger.setLevel(logging.NOTSET)
    try:
        controller_cli.run_controller(type("A", (), {"log_level": "DEBUG"})())
        assert client_logger.getEffectiveLevel() == logging.INFO
        assert not client_logger.isEnabledFor(logging.DEBUG)
    finally:
        root.setLevel(saved[0])
        client_logger.setLevel(saved[1])


async def _done() -> int:
    return 0


def test_the_controller_can_create_secrets_and_never_read_them():
    """It must not be able to read every Secret of the cluster (or of a namespace): create only."""
    for name in ("rbac-cluster.yaml", "rbac-namespace.yaml"):
        verbs = {v for r in _rules(name) if "" in r["apiGroups"] and "secrets" in r["resources"] for v in r["verbs"]}
        assert verbs == {"create"}, (name, verbs)


def test_the_push_path_adds_only_tokenreviews_create_and_its_own_tls_secret():
    """docs/progress.md: the progress endpoint asks the API server whose a token is, and the
    controllers keep its TLS in one Secret of their namespace, by name ("TLS")."""
    assert [(r["apiGroups"], r["resources"], r["verbs"], r.get("resourceNames")) for r in _rules("rbac-progress-push.yaml")] == [
        (["authentication.k8s.io"], ["tokenreviews"], ["create"], None),
        ([""], ["secrets"], ["get", "watch", "update"], ["airflow-t9k-controller-progress-certs"]),
        ([""], ["secrets"], ["create"], None),  # cannot be limited to a name
    ]
    roles = [d for d in yaml.safe_load_all((DEPLOY / "rbac-progress-push.yaml").read_text()) if d["kind"] == "Role"]
    assert [r["metadata"]["namespace"] for r in roles] == ["airflow-t9k-system"]
    for name in ("rbac-cluster.yaml", "rbac-namespace.yaml"):  # not granted unless the push path is on
        assert not any("tokenreviews" in r["resources"] for r in _rules(name)), name
