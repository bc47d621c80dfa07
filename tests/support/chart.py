"""The Helm chart (deploy/chart/airflow-t9k) rendered by the real Helm binary.

Helm is a build artifact like the cluster's binaries: ``scripts/local-cluster.sh helm`` builds it
from the Go module proxy on first use (tools/helm) and prints its path; later calls find it in
~/.cache/airflow-t9k. A failed build fails the tests that need it (they never skip).
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "chart" / "airflow-t9k"
SCRIPT = ROOT / "scripts" / "local-cluster.sh"
KUBE_VERSION = "1.36.3"

Obj = dict[str, Any]


@functools.cache
def helm() -> str:
    # One build at a time: parallel test workers (make check) all ask on their first render.
    lock = Path(os.environ.get("T9K_CLUSTER_CACHE", Path.home() / ".cache" / "airflow-t9k")) / "helm.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        out = subprocess.run([str(SCRIPT), "helm"], check=False, capture_output=True, text=True)
    assert out.returncode == 0, f"building Helm failed (scripts/local-cluster.sh helm):\n{out.stderr[-3000:]}"
    return out.stdout.strip().splitlines()[-1]


def set_args(values: dict[str, Any]) -> list[str]:
    """--set-json for each value: lists and maps stay typed, whatever they hold."""
    import json

    args: list[str] = []
    for key, value in values.items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    return args


def template(values: dict[str, Any], namespace: str = "airflow-t9k-system", release: str = "airflow-t9k",
             check: bool = True) -> subprocess.CompletedProcess[str]:  # fmt: skip
    cmd = [helm(), "template", release, str(CHART), "--namespace", namespace, "--kube-version", KUBE_VERSION, *set_args(values)]
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def render(values: dict[str, Any], namespace: str = "airflow-t9k-system", release: str = "airflow-t9k") -> list[Obj]:
    out = template(values, namespace, release, check=False)
    assert out.returncode == 0, f"helm template failed for {values}:\n{out.stderr}"
    return [d for d in yaml.load_all(out.stdout, Loader=yaml.CSafeLoader) if d]


# Every choice the chart's values offer that changes what it renders; `ns` are the namespaces the
# variants name (they must exist where a render is sent to an API server).
def dimensions(ns: tuple[str, str] = ("team-a", "team-b")) -> tuple[dict[str, dict[str, Any]], ...]:
    scopes = {
        "selector": {},
        "namespaces": {"scope.mode": "namespaces", "scope.namespaces": list(ns)},
        "all": {"scope.mode": "all", "scope.exclude": ["airflow", "sandbox"]},
    }
    replicas = {
        "ha": {},
        "single": {"replicas": 1, "leaderElection.enabled": False},
        "ha-no-pdb": {"podDisruptionBudget.enabled": False},
    }
    policy = {
        "no-policy": {},
        "policy": {"admissionPolicy.enabled": True, "admissionPolicy.allowedServiceAccounts": ["default", "trainer"]},
    }
    airflow = {
        "no-airflow-rbac": {},
        "airflow-namespaces": {"airflow.rbac.namespaces": list(ns)},
        "airflow-namespaces-no-ui": {"airflow.rbac.namespaces": [ns[0]], "airflow.rbac.ui.enabled": False},
        # Cluster-wide, with the evidence RoleBinding in one namespace and a read-only UI.
        "airflow-cluster": {
            "airflow.rbac.clusterWide": True,
            "airflow.rbac.namespaces": [ns[1]],
            "airflow.rbac.ui.actions": False,
        },
    }
    return scopes, replicas, policy, airflow


# The CRD templates read nothing but crds.* (and the chart's labels): their three choices are
# rendered with every other value at its default, and the other dimensions as a full product
# without CRDs (2.5 MB of them per render would make the product take minutes).
CRDS: dict[str, dict[str, Any]] = {"crds-kept": {}, "crds-not-kept": {"crds.keep": False}, "no-crds": {"crds.install": False}}


# The progress push path's choices (progress.push.*, networkPolicy.*) read the scope (the
# NetworkPolicy's peers) and nothing else of the product: each is rendered with each scope, the
# other values at their defaults (the product itself renders the default, push on with the TLS the
# controllers keep).
PUSH: dict[str, dict[str, Any]] = {
    "push-off": {"progress.push.enabled": False},
    "push-own-secret-netpol": {"progress.push.tls.source": "secret", "progress.push.tls.secretName": "my-progress-tls",
                               "progress.push.port": 9443, "networkPolicy.enabled": True},
    "push-off-netpol": {"progress.push.enabled": False, "networkPolicy.enabled": True},
    "push-no-netpol": {"networkPolicy.enabled": False},  # opted out: the default renders it whenever push is on
}  # fmt: skip
# cert-manager's Certificate: rendered by the unit tests only (the local API server has no cert-manager CRDs).
CERT_MANAGER: dict[str, Any] = {
    "progress.push.tls.source": "certManager",
    "progress.push.tls.certManager.issuerRef": {"name": "team-ca", "kind": "ClusterIssuer"},
}


def combinations(ns: tuple[str, str] = ("team-a", "team-b"), cert_manager: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    scopes = dimensions(ns)[0]
    for choice in itertools.product(*(d.items() for d in dimensions(ns))):
        name = "/".join(n for n, _ in choice)
        values: dict[str, Any] = {"crds.install": False}
        for _, v in choice:
            values.update(v)
        yield name, values
    push = {**PUSH, **({"push-cert-manager": CERT_MANAGER} if cert_manager else {})}
    for (scope, scope_values), (variant, push_values) in itertools.product(scopes.items(), push.items()):
        yield f"{scope}/{variant}", {"crds.install": False, **scope_values, **push_values}
    for name, values in CRDS.items():
        yield name, values


def by_kind(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def granted(rules: list[Obj]) -> set[tuple[str, str, str, str]]:
    """Every (group, resource, verb, resourceName or '*') the rules grant."""
    return {
        (g, r, v, n)
        for rule in rules
        for g in rule.get("apiGroups", [])
        for r in rule.get("resources", [])
        for v in rule.get("verbs", [])
        for n in rule.get("resourceNames") or ["*"]
    }
