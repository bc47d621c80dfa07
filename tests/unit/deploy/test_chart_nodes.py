"""The chart's controller.avoidBadNodes and unhealthyNodeConditions (issue 47, item 2): the flags the
controller gets, read back by its own parser, and the one right it needs (watch nodes) granted only
with the feature. Rendered by the real Helm."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.nodes import NodeRule
from tests.support.chart import Obj, by_kind, granted, render, template


def _args(objs: list[Obj]) -> list[str]:
    (dep,) = by_kind(objs, "Deployment")
    return next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "controller")["args"]


def _parsed(objs: list[Obj]):
    from airflow_t9k.cli import build_parser

    return build_parser().parse_args(["controller", *_args(objs)])


def _node_verbs(objs: list[Obj]) -> set[str]:
    """What the controller's ClusterRoles allow on nodes."""
    roles = [r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"].startswith("airflow-t9k-controller")]
    return {v for role in roles for (group, res, v, _) in granted(role.get("rules") or []) if (group, res) == ("", "nodes")}


def test_on_by_default_with_nodes_watched():
    objs = render({})
    assert "--avoid-bad-nodes=on" in _args(objs)
    assert _parsed(objs).unhealthy_node_condition == []
    assert _node_verbs(objs) == {"list", "watch"}


def test_off_drops_the_watch_and_says_so_to_the_controller():
    objs = render({"controller.avoidBadNodes": False})
    assert "--avoid-bad-nodes=off" in _args(objs)
    assert _node_verbs(objs) == {"list"}  # in-place restarts still list them once


def test_the_platforms_rules_reach_the_controller_as_it_parses_them():
    rules = ["GPUHealthy=False", "taint:nvidia.com/gpu.unhealthy", "label:nvidia.com/gpu.health=unhealthy"]
    objs = render({"controller.unhealthyNodeConditions": rules})
    assert _parsed(objs).unhealthy_node_condition == [NodeRule("condition", "GPUHealthy", "False"),
                                                      NodeRule("taint", "nvidia.com/gpu.unhealthy", None),
                                                      NodeRule("label", "nvidia.com/gpu.health", "unhealthy")]  # fmt: skip


@pytest.mark.parametrize("bad", ["GPUHealthy", "label:nvidia.com/gpu.health", "has space=x"])
def test_a_rule_the_controller_would_refuse_fails_the_render(bad):
    out = template({"controller.unhealthyNodeConditions": [bad]}, "airflow-t9k-system", "airflow-t9k", check=False)
    assert out.returncode != 0
    assert "unhealthyNodeConditions" in out.stderr
