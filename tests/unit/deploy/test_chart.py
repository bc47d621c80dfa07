"""The Helm chart (deploy/chart/airflow-t9k), rendered by the real Helm for every combination of
its values: the RBAC variant follows the watch scope, every right is one the code uses, the
Deployment is the hardened one, the CRDs are `airflow-t9k crds`' own, and the plain manifests in
deploy/ are the chart's current rendering (one source of truth)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

from airflow_t9k.api.resources import RESOURCES, TEMPLATE_RESOURCES
from airflow_t9k.controller.crds import all_crds, template_crds
from tests.support.chart import CHART, KUBE_VERSION, ROOT, Obj, by_kind, combinations, granted, helm, render, template

NS = "airflow-t9k-system"
SA = {"kind": "ServiceAccount", "name": "airflow-t9k-controller", "namespace": NS}
JOB = "batch.tensorstack.dev"


def _all(group: str, resource: str, *verbs: str, names: tuple[str, ...] = ("*",)) -> set[tuple[str, str, str, str]]:
    return {(group, resource, v, n) for v in verbs for n in names}


def same(got: set, want: set) -> None:
    """Equal sets, or a failure naming what is granted too much and what is missing."""
    assert got == want, {"granted beyond the list": sorted(got - want), "missing": sorted(want - got)}


def controller_rules() -> set[tuple[str, str, str, str]]:
    """What the controller does in a namespace it reconciles (docs/install.md, "What each right is for")."""
    out: set[tuple[str, str, str, str]] = set()
    for r in RESOURCES.values():
        out |= _all(r.group, r.plural, "get", "list", "watch", "update")  # update: a template merged once
        out |= _all(r.group, f"{r.plural}/status", "get", "update", "patch")
        out |= _all(r.group, f"{r.plural}/finalizers", "update")
    out |= _all(JOB, "t9kjobtemplates", "get", "list", "watch")
    for res in ("pods", "services", "configmaps"):
        out |= _all("", res, "get", "list", "watch", "create", "delete")
    out |= _all("", "secrets", "create")  # SSH keys: create only, never read
    out |= _all("batch", "jobs", "get", "list", "watch", "create", "delete")
    out |= _all("scheduling.volcano.sh", "podgroups", "get", "list", "watch", "create", "delete")
    out |= _all("kueue.x-k8s.io", "workloads", "get", "list", "watch", "create", "delete")
    out |= _all("kueue.x-k8s.io", "workloads/status", "update")
    out |= _all("kueue.x-k8s.io", "localqueues", "get", "list", "watch")
    out |= _all("resource.k8s.io", "resourceclaimtemplates", "get", "list", "watch")  # DRA devices in status.usage
    out |= _all("", "events", "create", "patch", "list")
    out |= _all("", "pods/log", "get")
    out |= _all("", "pods", "patch")  # in-place restarts: the pod's annotations (docs/disruptions.md)
    out |= _all("", "configmaps", "patch")  # a DeepSpeed Elastic hostfile after a rescale (steps/children.py)
    out |= _all("scheduling.k8s.io", "podgroups", "get", "list", "watch", "create", "delete")  # gang, no add-on
    return out


def controller_cluster_rules() -> set[tuple[str, str, str, str]]:
    crds = tuple(r.crd_name for r in [*RESOURCES.values(), *TEMPLATE_RESOURCES.values()])
    out = _all("apiextensions.k8s.io", "customresourcedefinitions", "get", names=crds)
    out |= _all(JOB, "clustert9kjobtemplates", "get", "list", "watch")
    for res in ("resourceflavors", "workloadpriorityclasses"):
        out |= _all("kueue.x-k8s.io", res, "get", "list", "watch")
    out |= _all("", "nodes", "list")  # in-place restarts: nodes' status.declaredFeatures, once at start
    out |= _all("", "nodes", "watch")  # bad nodes avoided (controller.avoidBadNodes, on by default)
    return out | _all("scheduling.k8s.io", "priorityclasses", "get", "list", "watch")


def tasks_rules() -> set[tuple[str, str, str, str]]:
    out: set[tuple[str, str, str, str]] = set()
    for r in RESOURCES.values():
        out |= _all(r.group, r.plural, "create", "get", "list", "watch", "patch", "delete")
    out |= _all("", "events", "list", "watch") | _all("", "pods", "get", "list")
    return out | _all("", "pods/log", "get")


EVIDENCE = _all("", "configmaps", "get")  # per job namespace only, never cluster-wide (issue 29)


def ui_actions_rules() -> set[tuple[str, str, str, str]]:
    out: set[tuple[str, str, str, str]] = set()
    for r in RESOURCES.values():
        out |= _all(r.group, r.plural, "patch", "delete")
    return out | _all(JOB, "pytorchtrainingjobs/scale", "patch") | _all(JOB, "deepspeedjobs/scale", "patch")


def ui_rules() -> set[tuple[str, str, str, str]]:
    out: set[tuple[str, str, str, str]] = set()
    for r in RESOURCES.values():
        out |= _all(r.group, r.plural, "get", "list")
    out |= _all("", "pods", "get", "list") | _all("", "events", "list")
    return out | _all("", "pods/log", "get")  # ConfigMaps (evidence) only per namespace: EVIDENCE


COMBOS = list(combinations(cert_manager=True))


@pytest.fixture(scope="module", params=COMBOS, ids=[n for n, _ in COMBOS])
def rendered(request) -> tuple[dict[str, Any], list[Obj]]:
    _, values = request.param
    return values, render(values)


def _one(objs: list[Obj], kind: str, name: str, namespace: str | None = None) -> Obj:
    found = [o for o in objs if (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) == (kind, name, namespace)]
    assert len(found) == 1, (kind, name, namespace, [(o["kind"], o["metadata"]["name"]) for o in objs])
    return found[0]


def _binds(objs: list[Obj], binding_kind: str, name: str, namespace: str | None, subjects: list[Obj]) -> Obj:
    binding = _one(objs, binding_kind, name, namespace)
    role_kind = "Role" if binding_kind == "RoleBinding" else "ClusterRole"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name}
    assert binding["subjects"] == subjects
    return _one(objs, role_kind, name, namespace)


def test_every_combination_renders_one_consistent_release(rendered):
    _, objs = rendered
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys)), "an object rendered twice"
    for o in objs:
        labels = o["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "airflow-t9k", o
        assert labels["app.kubernetes.io/managed-by"] == "Helm", o
        assert labels["app.kubernetes.io/instance"] == "airflow-t9k", o
    namespaced = {
        "ServiceAccount",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "Secret",
        "NetworkPolicy",
        "Certificate",
    }
    for o in objs:
        assert ("namespace" in o["metadata"]) == (o["kind"] in namespaced), o["metadata"]
    # Every binding names a role of this render, and no role is left unbound.
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs if o["kind"] in ("Role", "ClusterRole")
    }
    bound = {
        # A RoleBinding may bind a ClusterRole in its namespace (the tasks' evidence role).
        (b["roleRef"]["kind"], b["metadata"].get("namespace") if b["roleRef"]["kind"] == "Role" else None, b["roleRef"]["name"])
        for b in objs
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
    }
    # The metrics reader is for the user to bind to their Prometheus' account; the roles for people
    # are aggregated into view, edit and admin (tests/unit/deploy/test_chart_contract.py).
    for_users = {("ClusterRole", None, f"airflow-t9k-{n}") for n in ("metrics-reader", "job-viewer", "job-editor")}
    assert roles - for_users == bound


def test_the_controller_gets_exactly_the_rights_of_its_scope(rendered):
    values, objs = rendered
    mode = values.get("scope.mode", "selector")
    name = "airflow-t9k-controller"
    if mode == "namespaces":
        for ns in values["scope.namespaces"]:
            role = _binds(objs, "RoleBinding", name, ns, [SA])
            same(granted(role["rules"]), controller_rules())
        reader = _binds(objs, "ClusterRoleBinding", f"{name}-crd-reader", None, [SA])
        same(granted(reader["rules"]), controller_cluster_rules())
        assert not [o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == name]
    else:
        role = _binds(objs, "ClusterRoleBinding", name, None, [SA])
        same(granted(role["rules"]), controller_rules() | controller_cluster_rules())
        assert not [o for o in by_kind(objs, "Role") if o["metadata"]["name"] == name]
    readers = [o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == f"{name}-namespaces"]
    if mode == "selector":  # Namespaces' labels, read only
        assert granted(_binds(objs, "ClusterRoleBinding", f"{name}-namespaces", None, [SA])["rules"]) == _all(
            "", "namespaces", "get", "list", "watch"
        )
    else:
        assert readers == []
    election = [o for o in by_kind(objs, "Role") if o["metadata"]["name"] == f"{name}-leader-election"]
    if values.get("leaderElection.enabled", True):
        role = _binds(objs, "RoleBinding", f"{name}-leader-election", NS, [SA])
        assert granted(role["rules"]) == {
            ("coordination.k8s.io", "leases", "create", "*"),
            ("coordination.k8s.io", "leases", "get", name),
            ("coordination.k8s.io", "leases", "update", name),
        }
    else:
        assert election == []


def test_no_right_is_wider_than_its_use(rendered):
    _, objs = rendered
    for role in [*by_kind(objs, "Role"), *by_kind(objs, "ClusterRole")]:
        for g, r, v, n in granted(role["rules"]):
            assert "*" not in (g, r, v), role["metadata"]["name"]
            if r == "secrets":  # never read by anyone the chart binds, but the push endpoint's TLS
                # Secret by its name, which the controllers keep (test_chart_push_tls.py)
                kept = (role["metadata"]["name"], n) == (
                    "airflow-t9k-controller-progress-tls",
                    "airflow-t9k-controller-progress-certs",
                )
                assert v == "create" or kept, (role["metadata"]["name"], v, n)


def test_the_deployment_is_hardened_and_follows_the_values(rendered):
    values, objs = rendered
    dep = _one(objs, "Deployment", "airflow-t9k-controller", NS)
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    args = c["args"]
    assert dep["spec"]["replicas"] == values.get("replicas", 2)
    assert c["image"] == "localhost/airflow-t9k/controller:0.1.0"
    assert c["command"] == ["airflow-t9k", "controller"]
    assert pod["serviceAccountName"] == SA["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    hardened = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    assert c["securityContext"] == hardened
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["ports"][0] == {"name": "health", "containerPort": 8081}
    assert "--health-port=8081" in args
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in c["env"]
    # /metrics names jobs: over HTTPS to tokens allowed to get it (metrics.secure), else loopback only.
    assert [a for a in args if a.startswith("--metrics")] == [
        "--metrics-secure",
        "--metrics-address=0.0.0.0",
        "--metrics-port=8080",
    ]
    mode = values.get("scope.mode", "selector")
    scope_args = [a for a in args if a.startswith(("--namespace", "--exclude-namespace"))]
    # Excluded in both scopes that could reach them: scope.exclude, and the namespaces Airflow's
    # identities run in (issue 45: a job there would put pods beside Airflow's own accounts).
    airflows = {"airflow"}  # the namespace of the default airflow.rbac.*.subjects
    excluded = [f"--exclude-namespace={n}" for n in sorted(set(values.get("scope.exclude", ["airflow"])) | airflows)]
    expected = {
        "selector": ["--namespace-selector=airflow-t9k.io/jobs=enabled", *excluded],
        "namespaces": [f"--namespace={n}" for n in values.get("scope.namespaces", [])],
        "all": excluded,
    }[mode]
    assert scope_args == expected
    leader = values.get("leaderElection.enabled", True)
    assert ("--leader-elect" in args) is leader
    assert ("--leader-election-id=airflow-t9k-controller" in args) is leader
    pdbs = by_kind(objs, "PodDisruptionBudget")
    if values.get("replicas", 2) > 1 and values.get("podDisruptionBudget.enabled", True):
        assert [p["spec"] for p in pdbs] == [{"minAvailable": 1, "selector": dep["spec"]["selector"]}]
    else:
        assert pdbs == []
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_the_push_path_is_wired_when_on_and_absent_when_off(rendered):
    """docs/progress.md, "The push path": a Service to the controllers' named port, the endpoint's
    TLS kept by the controllers in a Secret the chart renders empty (by default), or from a
    Secret mounted whole (never subPath: renewals reach the files), the flags naming it, and
    TokenReview create bound to the controller; nothing of it when off. The TLS in detail:
    test_chart_push_tls.py."""
    values, objs = rendered
    on = values.get("progress.push.enabled", True)
    port = values.get("progress.push.port", 8443)
    dep = _one(objs, "Deployment", "airflow-t9k-controller", NS)
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    push_args = [
        a for a in c["args"] if a.startswith("--progress-") and not a.startswith(("--progress-interval", "--progress-streams"))
    ]
    reviews = [o for o in by_kind(objs, "ClusterRole") if o["metadata"]["name"] == "airflow-t9k-controller-progress"]
    if not on:
        assert push_args == []
        assert c["ports"] == [{"name": "health", "containerPort": 8081}, {"name": "metrics", "containerPort": 8080}]
        assert "volumes" not in pod
        assert "volumeMounts" not in c
        assert [s["metadata"]["name"] for s in by_kind(objs, "Service")] == ["airflow-t9k-controller-metrics"]
        assert by_kind(objs, "Secret") == by_kind(objs, "Certificate") == reviews == []
        return
    svc = _one(objs, "Service", "airflow-t9k-controller-progress", NS)
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"] == [{"name": "progress", "port": port, "targetPort": "progress", "protocol": "TCP"}]
    assert c["ports"] == [{"name": "health", "containerPort": 8081}, {"name": "metrics", "containerPort": 8080},
                          {"name": "progress", "containerPort": port}]  # fmt: skip
    tls = "/etc/airflow-t9k/progress-tls"
    source = values.get("progress.push.tls.source", "controller")
    svc = f"airflow-t9k-controller-progress.{NS}.svc"
    if source == "controller":
        secret = values.get("progress.push.tls.secretName") or "airflow-t9k-controller-progress-certs"
        tls_args = [f"--progress-tls-secret={secret}", f"--progress-tls-dns-name={svc}",
                    f"--progress-tls-dns-name={svc}.cluster.local", "--progress-tls-cert-days=90",
                    "--progress-tls-ca-days=3650"]  # fmt: skip
    else:
        secret = values.get("progress.push.tls.secretName") or "airflow-t9k-controller-progress-tls"
        tls_args = [f"--progress-tls-cert={tls}/tls.crt", f"--progress-tls-key={tls}/tls.key", f"--progress-tls-ca={tls}/ca.crt"]
    assert push_args == [
        f"--progress-endpoint=https://{svc}:{port}",
        f"--progress-port={port}",
        *tls_args,
        "--progress-audience=airflow-t9k-progress",
        "--progress-push-rate=1",
        "--progress-push-burst=10",
        f"--progress-check-source-ip={'on' if values.get('progress.push.checkSourceIP', True) else 'off'}",
    ]
    if source == "controller":  # read through the API by every replica, no volume
        assert "volumeMounts" not in c
        assert "volumes" not in pod
    else:
        assert c["volumeMounts"] == [{"name": "progress-tls", "mountPath": tls, "readOnly": True}]  # no subPath
        items = [{"key": k, "path": k} for k in ("tls.crt", "tls.key", "ca.crt")]  # never a CA's key
        assert pod["volumes"] == [{"name": "progress-tls", "secret": {"secretName": secret, "items": items}}]
    same(granted(_binds(objs, "ClusterRoleBinding", "airflow-t9k-controller-progress", None, [SA])["rules"]),
         _all("authentication.k8s.io", "tokenreviews", "create"))  # fmt: skip
    secrets, certs = by_kind(objs, "Secret"), by_kind(objs, "Certificate")
    if source == "controller":
        (made,) = secrets
        assert made["metadata"]["name"] == secret
        assert "annotations" not in made["metadata"]  # removed with the release: no CA key left behind (issue 45)
        assert "data" not in made  # the controllers fill it: every render the same, no key in it (issue 46)
        assert certs == []
    elif source == "secret":
        assert secrets == certs == []  # the user's own
    else:
        (cert,) = certs
        assert cert["spec"]["secretName"] == secret
        assert cert["spec"]["issuerRef"] == {"name": "team-ca", "kind": "ClusterIssuer"}
        assert cert["spec"]["dnsNames"] == [f"airflow-t9k-controller-progress.{NS}.svc",
                                            f"airflow-t9k-controller-progress.{NS}.svc.cluster.local"]  # fmt: skip
        assert secrets == []


def test_the_network_policy_admits_pushes_from_the_scopes_namespaces(rendered):
    values, objs = rendered
    policies = by_kind(objs, "NetworkPolicy")
    enabled = values.get("networkPolicy.enabled", "auto")  # auto: whenever the push endpoint is served
    if not (enabled is True or (enabled == "auto" and values.get("progress.push.enabled", True))):
        assert policies == []
        return
    (policy,) = policies
    dep = _one(objs, "Deployment", "airflow-t9k-controller", NS)
    assert policy["spec"]["podSelector"] == {"matchLabels": dep["spec"]["selector"]["matchLabels"]}
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress (API server, kubelets) left alone
    rules = policy["spec"]["ingress"]
    assert rules[0] == {"ports": [{"port": "health", "protocol": "TCP"}]}  # the kubelet's probes, from anywhere
    assert rules[1] == {"ports": [{"port": "metrics", "protocol": "TCP"}]}  # scrapers, from anywhere: it checks their tokens
    if not values.get("progress.push.enabled", True):
        assert len(rules) == 2
        return
    (push,) = rules[2:]
    assert push["ports"] == [{"port": "progress", "protocol": "TCP"}]
    mode = values.get("scope.mode", "selector")
    expected = {
        "selector": [{"namespaceSelector": {"matchLabels": {"airflow-t9k.io/jobs": "enabled"}}}],
        "namespaces": [{"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": values.get("scope.namespaces")}]}}],
        "all": [{"namespaceSelector": {}}],
    }[mode]  # fmt: skip
    assert push["from"] == expected


def test_the_crds_are_airflow_t9k_crds_own_kept_on_uninstall(rendered):
    values, objs = rendered
    crds = by_kind(objs, "CustomResourceDefinition")
    if not values.get("crds.install", True):
        assert crds == []
        return
    expected = {c["metadata"]["name"]: c for c in [*all_crds(), *template_crds()]}
    assert sorted(c["metadata"]["name"] for c in crds) == sorted(expected)
    for crd in crds:
        meta = crd["metadata"]
        assert crd["spec"] == expected[meta["name"]]["spec"], meta["name"]
        # part-of is how the controller knows them as ours; managed-by=Helm lets a later install adopt them.
        assert meta["labels"]["app.kubernetes.io/part-of"] == "airflow-t9k"
        kept = (meta.get("annotations") or {}).get("helm.sh/resource-policy")
        assert kept == ("keep" if values.get("crds.keep", True) else None)


def test_the_admission_policy_is_there_only_when_asked(rendered):
    values, objs = rendered
    # The UI's and the controller's own policies: test_the_ui_actions_policy_..., test_the_controllers_policy_...
    others = ("airflow-t9k-ui-actions", "airflow-t9k-controller-writes", "airflow-t9k-token-secrets")
    policies = [p for p in by_kind(objs, "ValidatingAdmissionPolicy") if p["metadata"]["name"] not in others]
    bindings = [b for b in by_kind(objs, "ValidatingAdmissionPolicyBinding") if b["metadata"]["name"] not in others]
    if not values.get("admissionPolicy.enabled"):
        assert policies == bindings == []
        return
    (policy,), (binding,) = policies, bindings
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    accounts = [v for v in policy["spec"]["variables"] if v["name"] == "allowedServiceAccounts"]
    assert accounts == [{"name": "allowedServiceAccounts", "expression": "['default', 'trainer']"}]
    kinds = {r for rule in policy["spec"]["matchConstraints"]["resourceRules"] for r in rule["resources"]}
    assert kinds == {r.plural for r in RESOURCES.values()}


def test_the_controllers_policy_binds_its_own_identity_to_its_scope(rendered):
    values, objs = rendered
    (policy,) = [
        p for p in by_kind(objs, "ValidatingAdmissionPolicy") if p["metadata"]["name"] == "airflow-t9k-controller-writes"
    ]
    (binding,) = [b for b in by_kind(objs, "ValidatingAdmissionPolicyBinding")
                  if b["metadata"]["name"] == "airflow-t9k-controller-writes"]  # fmt: skip
    assert binding["spec"] == {"policyName": "airflow-t9k-controller-writes", "validationActions": ["Deny"]}
    dep = _one(objs, "Deployment", "airflow-t9k-controller", NS)
    account = dep["spec"]["template"]["spec"]["serviceAccountName"]
    (match,) = policy["spec"]["matchConditions"]
    assert match["expression"] == f"request.userInfo.username == 'system:serviceaccount:{NS}:{account}'"
    scope, owned, pod_spec = (v["expression"] for v in policy["spec"]["validations"])
    # One exception, the push endpoint's TLS Secret the controllers keep (test_chart_push_tls.py).
    (tls_secret,) = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "progressTLS"]
    kept = values.get("progress.push.enabled", True) and values.get("progress.push.tls.source", "controller") == "controller"
    assert (tls_secret != "false") is kept
    assert scope.startswith("variables.progressTLS || (")
    scope = scope.removeprefix("variables.progressTLS || (").removesuffix(")")
    mode = values.get("scope.mode", "selector")
    if mode == "namespaces":
        assert scope == "request.namespace in [" + ", ".join(f"'{n}'" for n in values["scope.namespaces"]) + "]"
    else:
        excluded = [NS, *values.get("scope.exclude", ["airflow"])]
        assert scope.startswith("!(request.namespace in [" + ", ".join(f"'{n}'" for n in excluded) + "])")
        if mode == "selector":
            assert "namespaceObject.metadata.labels['airflow-t9k.io/jobs'] == 'enabled'" in scope
    assert owned == "variables.progressTLS || variables.ownedByAJob"
    assert pod_spec == "request.operation != 'UPDATE' || request.kind.kind != 'Pod' || object.spec == oldObject.spec"


def test_the_ui_actions_policy_comes_with_the_actions_role(rendered):
    values, objs = rendered
    rbac_on = values.get("airflow.rbac.namespaces") or values.get("airflow.rbac.clusterWide")
    actions = rbac_on and values.get("airflow.rbac.ui.enabled", True) and values.get("airflow.rbac.ui.actions", True)
    policies = [p for p in by_kind(objs, "ValidatingAdmissionPolicy") if p["metadata"]["name"] == "airflow-t9k-ui-actions"]
    bindings = [b for b in by_kind(objs, "ValidatingAdmissionPolicyBinding") if b["metadata"]["name"] == "airflow-t9k-ui-actions"]
    if not actions:
        assert policies == bindings == []
        return
    (policy,), (binding,) = policies, bindings
    assert binding["spec"] == {"policyName": "airflow-t9k-ui-actions", "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    (match,) = policy["spec"]["matchConditions"]
    assert "request.userInfo.username in ['system:serviceaccount:airflow:airflow-api-server']" in match["expression"]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {r for rule in rules for r in rule["resources"]} == {r.plural for r in RESOURCES.values()}  # no subresource
    assert {op for rule in rules for op in rule["operations"]} == {"UPDATE"}  # Delete is RBAC's


def test_airflows_identities_get_their_roles_where_jobs_run(rendered):
    values, objs = rendered
    tasks = [{"kind": "ServiceAccount", "name": "airflow-worker", "namespace": "airflow"},
             {"kind": "ServiceAccount", "name": "airflow-triggerer", "namespace": "airflow"}]  # fmt: skip
    ui = [{"kind": "ServiceAccount", "name": "airflow-api-server", "namespace": "airflow"}]
    ui_on = values.get("airflow.rbac.ui.enabled", True)
    actions = ui_on and values.get("airflow.rbac.ui.actions", True)
    namespaces = values.get("airflow.rbac.namespaces", [])
    cluster = values.get("airflow.rbac.clusterWide", False)
    ui_names = {"airflow-t9k-ui-read"} | ({"airflow-t9k-ui-actions"} if actions else set())
    if cluster:
        same(granted(_binds(objs, "ClusterRoleBinding", "airflow-t9k-tasks", None, tasks)["rules"]), tasks_rules())
        if ui_on:
            same(granted(_binds(objs, "ClusterRoleBinding", "airflow-t9k-ui-read", None, ui)["rules"]), ui_rules())
        if actions:
            same(granted(_binds(objs, "ClusterRoleBinding", "airflow-t9k-ui-actions", None, ui)["rules"]), ui_actions_rules())
        # The tasks (DAG authors' code) and the UI read ConfigMaps never through a ClusterRoleBinding;
        # the evidence ClusterRoles are bound per namespace.
        for b in (b for b in by_kind(objs, "ClusterRoleBinding") if b["subjects"] in (tasks, ui)):
            role = _one(objs, "ClusterRole", b["roleRef"]["name"])
            assert not {r for _, r, _, _ in granted(role["rules"])} & {"configmaps", "secrets"}, b["metadata"]["name"]
        for ns in namespaces:
            binding = _one(objs, "RoleBinding", "airflow-t9k-evidence", ns)
            assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                          "name": "airflow-t9k-evidence"}  # fmt: skip
            assert binding["subjects"] == tasks
            same(granted(_one(objs, "ClusterRole", "airflow-t9k-evidence")["rules"]), EVIDENCE)
            if ui_on:
                ui_evidence = _one(objs, "RoleBinding", "airflow-t9k-ui-evidence", ns)
                assert ui_evidence["roleRef"]["name"] == "airflow-t9k-ui-evidence"
                assert ui_evidence["subjects"] == ui
                same(granted(_one(objs, "ClusterRole", "airflow-t9k-ui-evidence")["rules"]), EVIDENCE)
        assert not [o for o in by_kind(objs, "Role") if o["metadata"]["name"].startswith(("airflow-t9k-tasks", "airflow-t9k-ui"))]
    else:
        for ns in namespaces:
            same(granted(_binds(objs, "RoleBinding", "airflow-t9k-tasks", ns, tasks)["rules"]), tasks_rules() | EVIDENCE)
            if ui_on:
                same(granted(_binds(objs, "RoleBinding", "airflow-t9k-ui-read", ns, ui)["rules"]), ui_rules() | EVIDENCE)
            if actions:
                same(granted(_binds(objs, "RoleBinding", "airflow-t9k-ui-actions", ns, ui)["rules"]), ui_actions_rules())
    names = {o["metadata"]["name"] for o in objs if o["kind"] in ("Role", "ClusterRole")}
    assert ("airflow-t9k-tasks" in names) is bool(namespaces or cluster)
    assert ("airflow-t9k-evidence" in names) is bool(namespaces and cluster)
    assert ("airflow-t9k-ui-evidence" in names) is bool(namespaces and cluster and ui_on)
    for name in ("airflow-t9k-ui-read", "airflow-t9k-ui-actions"):
        assert (name in names) is bool((namespaces or cluster) and name in ui_names and ui_on), name


def test_the_ui_role_reads_and_changes_nothing():
    verbs = {v for _, _, v, _ in ui_rules()}
    assert verbs == {"get", "list"}  # no create, update, patch, delete; no watch (the page polls)
    assert not {r for _, r, _, _ in ui_rules()} & {"secrets", "pods/exec", "pods/attach"}
    # Its actions: patch and delete on jobs and patch on two scale subresources; nothing read, nothing made.
    assert {v for _, _, v, _ in ui_actions_rules()} == {"patch", "delete"}
    assert {r for _, r, _, _ in ui_actions_rules() if "/" in r} == {"pytorchtrainingjobs/scale", "deepspeedjobs/scale"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"scope.mode": "everything"}, "at '/scope/mode': value must be one of 'selector', 'namespaces', 'all'"),
        ({"scope.mode": "namespaces"}, "needs at least one namespace in scope.namespaces"),
        ({"scope.mode": "namespaces", "scope.namespaces": [NS]}, "lists the release's own namespace"),
        ({"scope.selector": ""}, "needs scope.selector"),
        ({"leaderElection.enabled": False}, "more than one replica needs leaderElection.enabled"),
        ({"controller.queueing": "sometimes"}, "at '/controller/queueing': value must be one of 'auto', 'kueue', 'off'"),
        ({"progress.push.tls.source": "secret"}, "progress.push.tls.source=secret needs progress.push.tls.secretName"),
        ({"progress.push.tls.source": "certManager"}, "needs progress.push.tls.certManager.issuerRef"),
        ({"controller.progressInterval": 0}, "progress.push.enabled needs controller.progressInterval > 0"),
        ({"networkPolicy.enabled": True, "scope.selector": "team in (a,b)"}, "give networkPolicy.pushFrom"),
        ({"scope.selector": "team in (a,b)"}, "give networkPolicy.pushFrom"),  # auto: push is on by default
        ({"networkPolicy.enabled": "sometimes"}, "at '/networkPolicy/enabled': value must be one of 'auto', true, false"),
        ({"serviceAccount.create": False}, "serviceAccount.create=false needs serviceAccount.name"),
        ({"serviceAccount.create": False, "serviceAccount.name": "default"}, "Not default"),
    ],
)
def test_values_that_cannot_work_fail_the_render_naming_the_value(values, message):
    out = template(values, check=False)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr


@pytest.mark.parametrize("values", [{}, {"scope.mode": "namespaces", "scope.namespaces": ["ml-jobs"]}, {"scope.mode": "all"},
                                    {"admissionPolicy.enabled": True, "airflow.rbac.clusterWide": True},
                                    {"progress.push.enabled": False}, {"networkPolicy.enabled": True}])  # fmt: skip
def test_helm_lint_passes_strict(values):
    from tests.support.chart import set_args

    out = subprocess.run([helm(), "lint", str(CHART), "--strict", "--kube-version", KUBE_VERSION, *set_args(values)],
                         check=False, capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout


def test_the_chart_version_is_the_packages():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert version
    assert chart["version"] == chart["appVersion"] == version.group(1)


def test_the_chart_crd_templates_are_current():
    """Regenerated by scripts/gen_chart.py from `airflow-t9k crds`; no Helm needed for this one."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_chart.py"), "--check", "--crds-only"],
                         check=False, capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, f"run scripts/gen_chart.py (or make chart):\n{out.stdout}{out.stderr}"


def test_the_plain_manifests_are_the_charts_current_rendering():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_chart.py"), "--check"], check=False, capture_output=True,
                         text=True, env={**os.environ, "T9K_HELM": helm()})  # fmt: skip
    assert out.returncode == 0, f"run scripts/gen_chart.py (or make chart):\n{out.stdout}{out.stderr}"


def test_an_account_made_beforehand_is_used_and_not_rendered():
    from tests.support.chart import render

    objs = render({"serviceAccount.create": False, "serviceAccount.name": "t9k-ctl", "crds.install": False})
    assert by_kind(objs, "ServiceAccount") == []
    dep = _one(objs, "Deployment", "airflow-t9k-controller", NS)
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "t9k-ctl"


@pytest.mark.parametrize("mode", ["selector", "all"])
def test_the_namespaces_airflow_runs_in_are_never_reconciled(mode):
    """Issue 45, item 6: a job in Airflow's own namespace puts pods beside its identities (and a
    labelled Airflow namespace was reconciled in the selector scope): every subject's namespace is
    excluded, in the controller's flags and in its admission policy."""
    from tests.support.chart import render

    subjects = [{"kind": "ServiceAccount", "name": "worker", "namespace": "airflow-prod"}]
    ui = [{"kind": "ServiceAccount", "name": "web", "namespace": "airflow-web"}]
    objs = render({"scope.mode": mode, "scope.exclude": ["legacy"], "airflow.rbac.tasks.subjects": subjects,
                   "airflow.rbac.ui.subjects": ui, "crds.install": False})  # fmt: skip
    args = _one(objs, "Deployment", "airflow-t9k-controller", NS)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--exclude-namespace")] == [
        "--exclude-namespace=airflow-prod",
        "--exclude-namespace=airflow-web",
        "--exclude-namespace=legacy",
    ]
    (policy,) = [
        p for p in by_kind(objs, "ValidatingAdmissionPolicy") if p["metadata"]["name"] == "airflow-t9k-controller-writes"
    ]
    assert policy["spec"]["validations"][0]["expression"].startswith(
        f"variables.progressTLS || (!(request.namespace in ['{NS}', 'airflow-prod', 'airflow-web', 'legacy'])"
    )


@pytest.mark.parametrize("secure", [True, False])
def test_metrics_are_served_securely_behind_a_service_prometheus_can_bind_to(secure):
    """Issue 45, item 5: HTTPS, TokenReview and SubjectAccessReview (the controller's right to ask),
    a metrics Service, a reader ClusterRole to bind Prometheus to, opt-in monitors; off: loopback only."""
    from tests.support.chart import render

    objs = render({"metrics.secure": secure, "metrics.serviceMonitor.enabled": secure, "metrics.podMonitor.enabled": secure,
                   "metrics.podMonitor.tokenSecret": "prometheus-token", "crds.install": False})  # fmt: skip
    args = _one(objs, "Deployment", "airflow-t9k-controller", NS)["spec"]["template"]["spec"]["containers"][0]["args"]
    names = {(o["kind"], o["metadata"]["name"]) for o in objs}
    if not secure:
        assert [a for a in args if a.startswith("--metrics")] == ["--metrics-address=127.0.0.1", "--metrics-port=8080"]
        assert not {n for n in names if "metrics" in n[1] or n[0] in ("ServiceMonitor", "PodMonitor")}
        return
    assert "--metrics-secure" in args
    reader = _one(objs, "ClusterRole", "airflow-t9k-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    auth = _one(objs, "ClusterRole", "airflow-t9k-controller-metrics-auth")
    assert granted(auth["rules"]) == {("authentication.k8s.io", "tokenreviews", "create", "*"),
                                      ("authorization.k8s.io", "subjectaccessreviews", "create", "*")}  # fmt: skip
    svc = _one(objs, "Service", "airflow-t9k-controller-metrics", NS)
    assert svc["spec"]["ports"] == [{"name": "https", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]
    (monitor,) = by_kind(objs, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == ("https", "https", "/metrics")
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    (pod_monitor,) = by_kind(objs, "PodMonitor")
    (pod_endpoint,) = pod_monitor["spec"]["podMetricsEndpoints"]
    assert pod_endpoint["authorization"]["credentials"] == {"name": "prometheus-token", "key": "token"}


TOKEN_SECRETS_OFF = {"admissionPolicy.enabled": True, "admissionPolicy.tokenSecrets.enabled": False}


@pytest.mark.parametrize(
    ("values", "rendered_"), [({}, False), ({"admissionPolicy.enabled": True}, True), (TOKEN_SECRETS_OFF, False)]
)
def test_the_token_secret_policy_comes_with_the_admission_policy(values, rendered_):
    """Issue 45, item 6: the token-Secret policy was a loose file; it is the chart's, with the same accounts."""
    from tests.support.chart import render

    objs = render({**values, "admissionPolicy.allowedServiceAccounts": ["default", "trainer"], "crds.install": False})
    policies = [p for p in by_kind(objs, "ValidatingAdmissionPolicy") if p["metadata"]["name"] == "airflow-t9k-token-secrets"]
    if not rendered_:
        assert policies == []
        return
    (policy,) = policies
    accounts = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "allowedServiceAccounts"]
    assert accounts == ["['default', 'trainer']"]
    (binding,) = [
        b for b in by_kind(objs, "ValidatingAdmissionPolicyBinding") if b["metadata"]["name"] == "airflow-t9k-token-secrets"
    ]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"airflow-t9k.io/jobs": "enabled"}}
