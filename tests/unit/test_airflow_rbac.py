"""deploy/rbac-airflow-*.yaml: what Airflow's workers and triggerer may do, and nothing more."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from airflow_t9k.api.resources import RESOURCES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
VARIANTS = ("rbac-airflow-namespace.yaml", "rbac-airflow-cluster.yaml")
JOB_VERBS = ("create", "get", "list", "watch", "patch", "delete")


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _granted(name: str) -> set[tuple[str, str, str]]:
    rules = [r for d in _docs(name) if d["kind"] in ("Role", "ClusterRole") for r in d["rules"]]
    return {(g, res, v) for r in rules for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}


def _expected() -> set[tuple[str, str, str]]:
    jobs = {(r.group, r.plural, v) for r in RESOURCES.values() for v in JOB_VERBS}
    core = {
        ("", "events", "list"),
        ("", "events", "watch"),
        ("", "pods", "get"),
        ("", "pods", "list"),
        ("", "pods/log", "get"),
        ("", "configmaps", "get"),
    }  # the evidence ConfigMap the T9k Job tab shows
    return jobs | core


@pytest.mark.parametrize("name", VARIANTS)
def test_every_kind_is_granted_to_submit_watch_pause_and_delete(name):
    granted = _granted(name)
    for res in RESOURCES.values():
        assert {(res.group, res.plural, v) for v in JOB_VERBS} <= granted, (name, res.kind)


@pytest.mark.parametrize("name", VARIANTS)
def test_nothing_beyond_what_the_hooks_and_trigger_call(name):
    granted = _granted(name)
    assert granted == _expected(), (granted - _expected(), _expected() - granted)
    assert not any("*" in part or res.endswith("/status") or res == "secrets" for g, res, v in granted for part in (g, res, v))


def test_both_variants_grant_the_same_rules_to_the_worker_and_the_triggerer():
    assert _granted(VARIANTS[0]) == _granted(VARIANTS[1])
    kinds = {name: [d["kind"] for d in _docs(name)] for name in VARIANTS}
    assert kinds == {VARIANTS[0]: ["Role", "RoleBinding"], VARIANTS[1]: ["ClusterRole", "ClusterRoleBinding"]}
    for name in VARIANTS:
        role, binding = _docs(name)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role["kind"],
            "name": role["metadata"]["name"],
        }
        subjects = {(s["kind"], s["name"]) for s in binding["subjects"]}
        assert subjects == {("ServiceAccount", "airflow-worker"), ("ServiceAccount", "airflow-triggerer")}
