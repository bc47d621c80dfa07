"""Kind name -> kind module. The controller reconciles exactly the kinds listed here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.kinds.ascend import AscendJob
from airflow_t9k.kinds.beam import BeamJob
from airflow_t9k.kinds.colossalai import ColossalAIJob
from airflow_t9k.kinds.deepspeed import DeepSpeedJob
from airflow_t9k.kinds.generic import GenericJob
from airflow_t9k.kinds.mpi import MPIJob
from airflow_t9k.kinds.pytorch import PyTorchTrainingJob
from airflow_t9k.kinds.tensorflow import TensorFlowTrainingJob
from airflow_t9k.kinds.xgboost import XGBoostTrainingJob

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import JobKind

KINDS: dict[str, JobKind] = {
    k.resource.kind: k
    for k in (
        GenericJob(),
        ColossalAIJob(),
        PyTorchTrainingJob(),
        TensorFlowTrainingJob(),
        XGBoostTrainingJob(),
        MPIJob(),
        DeepSpeedJob(),
        BeamJob(),
        AscendJob(),
    )
}


def get_kind(kind: str) -> JobKind:
    try:
        return KINDS[kind]
    except KeyError:
        raise KeyError(f"no reconciler for kind {kind!r}; reconciled kinds: {', '.join(sorted(KINDS))}") from None
