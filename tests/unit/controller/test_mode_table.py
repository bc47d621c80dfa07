"""Seed 000's table of which kind supports which mode, cell by cell, in the pure core.

The CRDs refuse the same cells at admission (tests/integration/test_mode_table.py); the core
checks again for CRDs applied by hand, failing the job with InvalidSpec.
"""

from __future__ import annotations

import pytest

from airflow_t9k.controller.crds import all_crds
from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.kinds.base import ELASTIC_KINDS, InvalidSpec
from airflow_t9k.kinds.registry import KINDS
from tests.builders import NOW
from tests.kind_jobs import MODES, minimal, with_mode

CELLS = [(kind, mode) for kind in MODES for mode in ("immediate", "debug", "pause", "elastic")]


@pytest.mark.parametrize(("kind", "mode"), CELLS, ids=[f"{k}-{m}" for k, m in CELLS])
def test_every_cell_of_the_mode_table(kind, mode):
    job = minimal(kind) if mode == "immediate" else with_mode(minimal(kind), mode)
    if mode == "immediate" or mode in MODES[kind]:
        KINDS[kind].validate(job)
        return
    with pytest.raises(InvalidSpec) as err:
        KINDS[kind].validate(job)
    if mode == "elastic":
        assert "only PyTorchTrainingJob and DeepSpeedJob" in str(err.value)


def test_the_table_and_the_code_agree():
    assert set(ELASTIC_KINDS) == {k for k, modes in MODES.items() if "elastic" in modes}
    assert {k for k, kind in KINDS.items() if kind.supports_elastic} == set(ELASTIC_KINDS)


@pytest.mark.parametrize(("kind", "replicas"), [("TensorFlowTrainingJob", 5), ("XGBoostTrainingJob", 5)])
def test_elastic_fields_never_scale_a_kind_without_elastic_mode(kind, replicas):
    # An XGBoost job with elastic enabled once ran 5 masters: the kind must not read spec.elastic.
    job = minimal(kind)
    job["spec"]["elastic"] = {"enabled": True, "expectedReplicas": replicas, "minReplicas": replicas, "maxReplicas": replicas}
    assert [s.replicas for s in KINDS[kind].replica_specs(job)] == [s["replicas"] for s in job["spec"]["replicaSpecs"]]
    failed = plan(job, Observed(), NOW)
    assert failed.status["phase"] == "Failed"
    assert failed.actions == ()


def _spec_schema(kind: str) -> dict:
    crd = next(c for c in all_crds() if c["spec"]["names"]["kind"] == kind)
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


@pytest.mark.parametrize("kind", sorted(MODES))
def test_crds_refuse_elastic_outside_its_column(kind):
    rules = [r["rule"] for r in _spec_schema(kind).get("x-kubernetes-validations", [])]
    assert ("!has(self.elastic)" in rules) is (kind not in ELASTIC_KINDS)
