"""Replica ceilings (reliability issue): one pair of constants, used by the CRDs, the core and the docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_t9k.controller.crds import all_crds
from airflow_t9k.controller.reconcile import Observed, plan
from airflow_t9k.kinds.base import MAX_REPLICAS_PER_TYPE, MAX_REPLICAS_TOTAL, InvalidSpec
from airflow_t9k.kinds.registry import KINDS
from tests.builders import NOW, generic
from tests.kind_jobs import minimal, with_replicas

DOCS = Path(__file__).resolve().parents[3] / "docs" / "kinds.md"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_refuses_more_than_the_ceiling_per_type(kind):
    KINDS[kind].validate(with_replicas(minimal(kind), MAX_REPLICAS_PER_TYPE))
    too_many = with_replicas(minimal(kind), MAX_REPLICAS_PER_TYPE + 1)
    with pytest.raises(InvalidSpec, match=f"at most {MAX_REPLICAS_PER_TYPE}"):
        KINDS[kind].validate(too_many)
    failed = plan(too_many, Observed(), NOW)
    assert failed.actions == ()
    assert "InvalidSpec" in str(failed.status["conditions"])  # T9k's phase or Kubeflow's conditions (AscendJob)


def test_total_ceiling():
    job = generic("job", ("a", MAX_REPLICAS_PER_TYPE), ("b", MAX_REPLICAS_TOTAL - MAX_REPLICAS_PER_TYPE), ("c", 0))
    KINDS["GenericJob"].validate(job)
    job["spec"]["replicaSpecs"][2]["replicas"] = 1
    with pytest.raises(InvalidSpec, match=f"at most {MAX_REPLICAS_TOTAL} per job"):
        KINDS["GenericJob"].validate(job)


def test_elastic_max_replicas_is_bounded_too():
    job = minimal("PyTorchTrainingJob")
    job["spec"]["elastic"] = {"enabled": True, "minReplicas": 1, "maxReplicas": MAX_REPLICAS_PER_TYPE + 1}
    job["spec"]["torchrunConfig"] = {"enabled": True}
    with pytest.raises(InvalidSpec, match="elastic.maxReplicas"):
        KINDS["PyTorchTrainingJob"].validate(job)


def _replica_maxima(schema: object) -> list[int]:
    """Every ``maximum`` on a property named replicas (or an elastic bound) in a schema."""
    found: list[int] = []
    if isinstance(schema, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in ("replicas", "minReplicas", "maxReplicas") and isinstance(sub, dict):
                found.append(sub.get("maximum", -1))
        for value in schema.values():
            found += _replica_maxima(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _replica_maxima(value)
    return found


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_every_crd_bounds_every_replica_count(crd):
    maxima = _replica_maxima(crd["spec"]["versions"][0]["schema"])
    assert maxima
    assert set(maxima) == {MAX_REPLICAS_PER_TYPE}


def test_docs_state_the_ceilings():
    text = DOCS.read_text()
    assert f"{MAX_REPLICAS_PER_TYPE:,}" in text
    assert f"{MAX_REPLICAS_TOTAL:,}" in text
