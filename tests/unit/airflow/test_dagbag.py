"""Every example DAG imports cleanly."""

from __future__ import annotations

from pathlib import Path

from airflow.dag_processing.dagbag import DagBag

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = {
    "example_genericjob", "example_pytorch", "example_tensorflow", "example_xgboost", "example_colossalai",
    "example_deepspeed", "example_mpi", "example_beam", "example_yaml_and_sensor", "retraining_pipeline", "example_ti", "example_ascend",
}  # fmt: skip


def test_every_example_dag_imports_without_errors(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    bag = DagBag(dag_folder=str(ROOT / "dags_examples"))
    assert bag.import_errors == {}
    assert set(bag.dags) == EXPECTED
    assert sorted(bag.dags["retraining_pipeline"].task_ids) == [
        "better_than_production", "evaluate", "keep_production", "prepare_data", "promote", "train"]  # fmt: skip
