"""``progressDeadlineSeconds`` on every kind (issue 47, item 1): where each kind keeps it, what its
CRD admits, and what the controller refuses of a CRD applied by hand."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.crds import all_crds
from airflow_t9k.kinds.base import InvalidSpec
from airflow_t9k.kinds.registry import KINDS
from tests.builders import generic, pytorch


def _schema_at(kind: str, path: tuple[str, ...]) -> dict:
    crd = next(c for c in all_crds() if c["spec"]["names"]["kind"] == kind)
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for key in path:
        node = node["properties"][key]
    return node


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_declares_the_field_where_it_keeps_it_with_minimum_1(kind):
    path = KINDS[kind].progress_deadline_path
    assert _schema_at(kind, path) == {"type": "integer", "minimum": 1}
    # runPolicy where the kind has one; GenericJob has none: beside its other run settings.
    assert path == (("progressDeadlineSeconds",) if kind == "GenericJob" else ("runPolicy", "progressDeadlineSeconds"))


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (generic(), None),
        (generic(progressDeadlineSeconds=600), 600),
        (pytorch(runPolicy={"progressDeadlineSeconds": 30}), 30),
        (pytorch(runPolicy={"backoffLimit": 2}), None),
    ],
)
def test_the_kind_reads_it(job, expected):
    kind = KINDS[job["kind"]]
    kind.validate(job)
    assert kind.progress_deadline(job) == expected


@pytest.mark.parametrize("bad", [0, -5, "600", True, 1.5])
def test_a_crd_applied_by_hand_lets_through_what_the_controller_refuses(bad):
    job = copy.deepcopy(generic(progressDeadlineSeconds=bad))
    with pytest.raises(InvalidSpec, match=r"spec.progressDeadlineSeconds must be an integer of at least 1"):
        KINDS["GenericJob"].validate(job)
