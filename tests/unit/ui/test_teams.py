"""``[t9k] team_namespaces``: which namespaces a team's tasks may show jobs in (ui/teams.py), and
the identity check every recorded job passes before its fields reach a path (api/identity.py)."""

from __future__ import annotations

import pytest

from airflow_t9k.api.identity import checked, problem
from airflow_t9k.ui.teams import TeamNamespacesError, allows, parse

TEAMS = '{"team_a": ["ml-a"], "team_b": ["ml-b", "shared"], "*": ["sandbox"]}'


@pytest.mark.parametrize(
    ("setting", "team", "namespace", "expected"),
    [
        ("", "team_a", "anything", True),  # not set: no restriction
        (TEAMS, "team_a", "ml-a", True),
        (TEAMS, "team_a", "ml-b", False),  # another team's namespace
        (TEAMS, "team_b", "shared", True),
        (TEAMS, None, "sandbox", True),  # a DAG of no team: the "*" entry
        (TEAMS, None, "ml-a", False),
        (TEAMS, "team_c", "sandbox", True),  # a team the setting does not name: "*"
        (TEAMS, "team_c", "ml-a", False),
        ('{"team_a": ["ml-a"]}', None, "ml-a", False),  # no "*": DAGs of no team show none
    ],
)
def test_team_namespaces(setting, team, namespace, expected):
    assert allows(parse(setting), team, namespace) is expected


@pytest.mark.parametrize("setting", ["{", "[]", '{"team_a": "ml-a"}', '{"team_a": [1]}', '{"team_a": [""]}'])
def test_a_malformed_setting_is_refused_not_ignored(setting):
    with pytest.raises(TeamNamespacesError):
        parse(setting)


GOOD = {"kind": "GenericJob", "namespace": "ml-a", "name": "train-1.a", "uid": "0b9e1c2a-7f3d-4c55-9a61-0d3c2e8f4b11"}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({}, None),
        ({"kind": "Pod"}, "unknown kind"),
        ({"namespace": "../kube-system"}, "namespace"),
        ({"namespace": "A"}, "namespace"),
        ({"namespace": "a" * 64}, "namespace"),
        ({"name": "x/../../secrets"}, "name"),
        ({"name": "x?watch=1"}, "name"),
        ({"name": "a" * 254}, "name"),
        ({"uid": "u/1"}, "uid"),
        ({"uid": ""}, "uid missing"),
        ({"name": 3}, "name missing"),
    ],
)
def test_an_identity_is_checked_before_its_fields_reach_a_path(change, why):
    value = {**GOOD, **change, "server": "https://k8s"}
    found = problem(value)
    assert (found is None) if why is None else (found is not None and why in found), found
    assert checked(value) == ({k: value[k] for k in ("kind", "namespace", "name", "uid")} if why is None else None)
    assert problem("not a dict") is not None
