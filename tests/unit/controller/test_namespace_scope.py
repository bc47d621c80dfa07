"""Which namespaces the controller reconciles: never the cluster's own or its own; a selector narrows."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.scope import Scope, SelectorError, parse_selector

TEAM = {"team": "a", "airflow-t9k.io/jobs": "enabled"}

SCOPE_CASES = [
    # (scope, namespace, labels, managed?)
    (Scope(), "ml-team-a", {}, True),
    (Scope(), "kube-system", {}, False),
    (Scope(), "kube-public", {}, False),
    (Scope(), "kube-node-lease", {}, False),
    (Scope(), "default", None, True),  # no selector: labels are not needed
    (Scope(own="airflow-t9k-system"), "airflow-t9k-system", {}, False),
    (Scope(own="airflow-t9k-system"), "ml", {}, True),
    (Scope(selector=parse_selector("airflow-t9k.io/jobs=enabled")), "ml", TEAM, True),
    (Scope(selector=parse_selector("airflow-t9k.io/jobs=enabled")), "ml", {"team": "a"}, False),
    (Scope(selector=parse_selector("airflow-t9k.io/jobs=enabled")), "ml", None, False),  # unknown namespace
    (Scope(exclude=frozenset({"airflow"})), "airflow", {}, False),  # --exclude-namespace (Airflow's own)
    (Scope(exclude=frozenset({"airflow"})), "ml", {}, True),
    (Scope(selector=parse_selector("team"), exclude=frozenset({"airflow"})), "airflow", {"team": "x"}, False),
    # a selector cannot bring the system namespaces back
    (Scope(selector=parse_selector("team")), "kube-system", {"team": "x"}, False),
]


@pytest.mark.parametrize(
    ("scope", "namespace", "labels", "managed"),
    SCOPE_CASES,
    ids=[f"{c[1]}-{c[0].own}-{c[0].selector.text if c[0].selector else ''}-{c[3]}" for c in SCOPE_CASES],
)
def test_which_namespaces_are_managed(scope, namespace, labels, managed):
    why = scope.why_not(namespace, labels)
    assert (why is None) == managed
    if why is not None:
        assert namespace in why


SELECTOR_CASES = [
    ("team=a", {"team": "a"}, True),
    ("team==a", {"team": "b"}, False),
    ("team!=a", {}, True),
    ("team!=a", {"team": "a"}, False),
    ("team in (a, b)", {"team": "b"}, True),
    ("team in (a,b),env", {"team": "b"}, False),
    ("team in (a,b),env", {"team": "b", "env": ""}, True),
    ("team notin (a)", {"team": "a"}, False),
    ("!legacy", {"legacy": "1"}, False),
    ("!legacy", {}, True),
    ("example.com/tier=gold,team", {"example.com/tier": "gold", "team": "x"}, True),
]


@pytest.mark.parametrize(("text", "labels", "matches"), SELECTOR_CASES, ids=[c[0] for c in SELECTOR_CASES])
def test_label_selectors(text, labels, matches):
    assert parse_selector(text).matches(labels) is matches


@pytest.mark.parametrize("text", ["", "team=a,", "team in a", "team=(a)", "=a", "team > 3"])
def test_selectors_it_cannot_read_are_refused(text):
    with pytest.raises(SelectorError):
        parse_selector(text)


@pytest.mark.parametrize(
    ("argv", "env", "own", "selector"),
    [
        ([], {}, None, None),
        ([], {"POD_NAMESPACE": "airflow-t9k-system"}, "airflow-t9k-system", None),
        (["--namespace-selector", "team in (a,b)"], {}, None, "team in (a,b)"),
    ],
)
def test_the_cli_builds_the_scope(monkeypatch, argv, env, own, selector):
    from airflow_t9k.cli import build_parser
    from airflow_t9k.controller import cli

    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(cli, "SA_NAMESPACE", cli.Path("/nonexistent/namespace"))
    scope = cli.make_scope(build_parser().parse_args(["controller", *argv]))
    assert scope.own == own
    assert (scope.selector.text if scope.selector else None) == selector


def test_the_cli_refuses_a_bad_selector():
    from airflow_t9k.cli import build_parser
    from airflow_t9k.controller import cli

    with pytest.raises(cli.RefuseToStart, match="namespace-selector"):
        cli.make_scope(build_parser().parse_args(["controller", "--namespace-selector", "team in a"]))


def test_the_cli_takes_excluded_namespaces_and_refuses_bad_names(monkeypatch):
    from airflow_t9k.cli import build_parser
    from airflow_t9k.controller import cli

    monkeypatch.setenv("POD_NAMESPACE", "airflow-t9k-system")
    scope = cli.make_scope(build_parser().parse_args(["controller", "--exclude-namespace", "airflow",
                                                      "--exclude-namespace", "vault"]))  # fmt: skip
    assert scope.exclude == {"airflow", "vault"}
    assert scope.excluded() == ("kube-system", "kube-public", "kube-node-lease", "airflow-t9k-system", "airflow", "vault")
    assert "--exclude-namespace" in (scope.why_not("airflow", {}) or "")
    with pytest.raises(cli.RefuseToStart, match="exclude-namespace"):
        cli.make_scope(build_parser().parse_args(["controller", "--exclude-namespace", "Airflow/.."]))
