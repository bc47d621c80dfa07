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


def _rules(doc: dict) -> set[tuple[str, str, str]]:
    return {(g, res, v) for r in doc["rules"] for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}


def _granted(name: str) -> set[tuple[str, str, str]]:
    """What a worker and the triggerer get in a namespace jobs go to (every role bound to them)."""
    out: set[tuple[str, str, str]] = set()
    for d in _docs(name):
        if d["kind"] in ("Role", "ClusterRole"):
            out |= _rules(d)
    return out


def _cluster_wide(name: str) -> set[tuple[str, str, str]]:
    """What a ClusterRoleBinding grants them in every namespace."""
    roles = {d["metadata"]["name"]: d for d in _docs(name) if d["kind"] == "ClusterRole"}
    return {r for d in _docs(name) if d["kind"] == "ClusterRoleBinding" for r in _rules(roles[d["roleRef"]["name"]])}


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
    kinds = {name: sorted(d["kind"] for d in _docs(name)) for name in VARIANTS}  # Helm orders them by kind
    assert kinds == {VARIANTS[0]: ["Role", "RoleBinding"],
                     VARIANTS[1]: ["ClusterRole", "ClusterRole", "ClusterRoleBinding", "RoleBinding"]}  # fmt: skip
    for name in VARIANTS:
        docs = _docs(name)
        roles = {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in ("Role", "ClusterRole")}
        for binding in (d for d in docs if d["kind"].endswith("Binding")):
            assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles
            subjects = {(s["kind"], s["name"]) for s in binding["subjects"]}
            assert subjects == {("ServiceAccount", "airflow-worker"), ("ServiceAccount", "airflow-triggerer")}


def test_dag_authors_read_no_configmap_across_the_cluster():
    """Issue 29: the cluster-wide variant's evidence reads are bound per job namespace only."""
    wide = _cluster_wide("rbac-airflow-cluster.yaml")
    assert not any(res in ("configmaps", "secrets") for _, res, _ in wide), wide
    evidence = next(d for d in _docs("rbac-airflow-cluster.yaml") if d["kind"] == "RoleBinding")
    assert evidence["roleRef"]["name"] == "airflow-t9k-evidence"
    assert evidence["metadata"]["namespace"] == "ml-jobs"


UI = "rbac-airflow-ui.yaml"


def test_the_ui_role_is_read_only_and_its_actions_are_a_separate_role():
    """The chart renders them as Roles in each namespace (this file, `ml-jobs`) or, with
    airflow.rbac.clusterWide, as ClusterRoles (tests/unit/deploy/test_chart.py checks both)."""
    roles = {d["metadata"]["name"]: _rules(d) for d in _docs(UI) if d["kind"] in ("Role", "ClusterRole")}
    assert set(roles) == {"airflow-t9k-ui-read", "airflow-t9k-ui-actions"}
    read, actions = roles["airflow-t9k-ui-read"], roles["airflow-t9k-ui-actions"]
    assert {v for _, _, v in read} == {"get", "list"}  # no create, no watch, no write
    assert {res for _, res, _ in read} == {r.plural for r in RESOURCES.values()} | {"pods", "pods/log", "events", "configmaps"}
    assert {(res, v) for _, res, v in read if res == "configmaps"} == {("configmaps", "get")}  # by name, never listed
    assert {v for _, _, v in actions} == {"patch", "delete"}
    assert {res for _, res, _ in actions} == {r.plural for r in RESOURCES.values()} | {"pytorchtrainingjobs/scale",
                                                                                    "deepspeedjobs/scale"}  # fmt: skip
    assert {v for _, res, v in actions if res.endswith("/scale")} == {"patch"}
    assert not any(res == "secrets" for _, res, _ in read | actions)
    bindings = [d for d in _docs(UI) if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert {d["roleRef"]["name"] for d in bindings} == set(roles)
    for d in bindings:  # each binds the role of its own name, to the UI's identity only
        assert d["metadata"]["name"] == d["roleRef"]["name"]
        assert [(s["kind"], s["name"]) for s in d["subjects"]] == [("ServiceAccount", "airflow-api-server")]
