"""The chart's jobPriority (issue 47, item 3): the PriorityClasses it installs for a documented range,
or the existing classes it names, and the controller's --priority-class-map that matches them.
Rendered by the real Helm."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.priority import parse_map
from tests.support.chart import Obj, by_kind, render, template


def _args(objs: list[Obj]) -> list[str]:
    (dep,) = by_kind(objs, "Deployment")
    return next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "controller")["args"]


def _parsed(objs: list[Obj]):
    """The controller's own parser reads the flags the chart writes (a bad map would stop it starting)."""
    from airflow_t9k.cli import build_parser

    return build_parser().parse_args(["controller", *_args(objs)])


def test_off_by_default_no_class_and_no_map():
    objs = render({})
    assert by_kind(objs, "PriorityClass") == []
    assert not [a for a in _args(objs) if a.startswith("--priority-class-map")]
    assert _parsed(objs).priority_class_map == []


def test_install_makes_one_class_a_priority_and_maps_each_to_its_own():
    objs = render({"jobPriority.install.enabled": True})
    classes = {c["metadata"]["name"]: c for c in by_kind(objs, "PriorityClass")}
    assert sorted(classes) == sorted(f"airflow-t9k-priority-{n}" for n in range(101))  # the documented 0..100
    assert {c["value"] for c in classes.values()} == set(range(101))  # valueBase 0: the value is the priority
    fifty = classes["airflow-t9k-priority-50"]
    assert fifty["preemptionPolicy"] == "PreemptLowerPriority"
    assert fifty["globalDefault"] is False  # no pod but a job's gets one
    assert fifty["metadata"]["labels"]["app.kubernetes.io/part-of"] == "airflow-t9k"
    assert "--priority-class-map=0-100=airflow-t9k-priority-{priority}" in _args(objs)
    [bands] = _parsed(objs).priority_class_map
    assert [(b.low, b.high, b.class_name(50)) for b in bands] == [(0, 100, "airflow-t9k-priority-50")]


def test_install_follows_its_range_base_prefix_and_policy():
    objs = render({"jobPriority.install.enabled": True, "jobPriority.install.from": 10, "jobPriority.install.to": 12,
                   "jobPriority.install.valueBase": -50, "jobPriority.install.prefix": "t9k-p",
                   "jobPriority.install.preemptionPolicy": "Never"})  # fmt: skip
    classes = {c["metadata"]["name"]: c for c in by_kind(objs, "PriorityClass")}
    assert {n: c["value"] for n, c in classes.items()} == {"t9k-p10": -40, "t9k-p11": -39, "t9k-p12": -38}
    assert {c["preemptionPolicy"] for c in classes.values()} == {"Never"}
    assert "--priority-class-map=10-12=t9k-p{priority}" in _args(objs)


def test_a_map_of_existing_classes_installs_none():
    objs = render({"jobPriority.map": ["0-49=batch-low", "50-89=batch-normal", "90-100=batch-high"]})
    assert by_kind(objs, "PriorityClass") == []
    assert "--priority-class-map=0-49=batch-low,50-89=batch-normal,90-100=batch-high" in _args(objs)
    [given] = _parsed(objs).priority_class_map
    assert given == parse_map("0-49=batch-low,50-89=batch-normal,90-100=batch-high")


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"jobPriority.install.enabled": True, "jobPriority.map": ["0-9=a"]}, "give one"),
        ({"jobPriority.install.enabled": True, "jobPriority.install.from": 5, "jobPriority.install.to": 4}, "is above"),
        ({"jobPriority.install.enabled": True, "jobPriority.install.to": 5000}, "at most 1000"),
        ({"jobPriority.install.enabled": True, "jobPriority.install.prefix": "Bad_"}, "must start a PriorityClass name"),
        ({"jobPriority.install.enabled": True, "jobPriority.install.prefix": "system-"}, "must not start with system-"),
        ({"jobPriority.install.preemptionPolicy": "Always"}, "preemptionPolicy"),
    ],
)
def test_values_that_cannot_work_fail_the_render(values, says):
    out = template(values, check=False)
    assert out.returncode != 0
    assert says in out.stderr, out.stderr
