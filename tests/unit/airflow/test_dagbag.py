"""Every example DAG imports cleanly."""

from __future__ import annotations

from pathlib import Path

from airflow.dag_processing.dagbag import DagBag

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = {
    "example_genericjob", "example_pytorch", "example_tensorflow", "example_xgboost", "example_colossalai",
    "example_deepspeed", "example_mpi", "example_beam", "example_yaml_and_sensor", "retraining_pipeline", "example_ti",
            "example_ascend",
    "example_pod_options", "example_queue", "retraining_pipeline_real", "retraining_evaluation",
}  # fmt: skip


def test_every_example_dag_imports_without_errors(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    bag = DagBag(dag_folder=str(ROOT / "dags_examples"))
    assert bag.import_errors == {}
    assert set(bag.dags) == EXPECTED
    for dag_id in ("retraining_pipeline", "retraining_pipeline_real"):
        assert sorted(bag.dags[dag_id].task_ids) == ["evaluate", "prepare_data", "promote", "train"]
        promote = bag.dags[dag_id].get_task("promote")  # PromoteOperator: one at a time, the production asset's writer
        assert (type(promote).__name__, promote.max_active_tis_per_dag) == ("PromoteOperator", 1)
    # The real one runs on the real node, with its program mounted; the kwok one never goes there.
    real = bag.dags["retraining_pipeline_real"].get_task("train")
    assert real.node_selector == {"t9k.test/real": "true"}
    assert real.image == "localhost/airflow-t9k/train:1"
    assert not bag.dags["retraining_pipeline"].get_task("train").node_selector
    # Asset-aware: train reads the data asset and updates the model asset; evaluation is scheduled on it.
    from airflow.sdk import Asset

    candidates, production = Asset("s3://models/clicks-ranker/candidates"), Asset("s3://models/clicks-ranker")
    for dag_id in ("retraining_pipeline", "retraining_pipeline_real"):
        dag = bag.dags[dag_id]
        train = dag.get_task("train")
        assert train.inlets == [Asset("s3://ml-data/clicks")]
        assert train.outlets == [candidates]  # every training: a candidate, not the production model
        promote = dag.get_task("promote")
        assert promote.outlets == [production]  # only a promotion updates it
        assert promote.max_active_tis_per_dag == 1  # one decision at a time, whatever the run (issue 44, 6)
        assert dag.max_active_runs == 1
    assert list(bag.dags["retraining_evaluation"].timetable.asset_condition.objects) == [candidates]


def test_an_example_dag_copied_alone_into_a_dag_folder_imports(tmp_path):
    """A user copies one file into their DAG folder: it may not import dags_examples."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    for dag in sorted((ROOT / "dags_examples").glob("*.py")):
        if dag.name != "__init__.py":
            shutil.copy(dag, tmp_path)
    shutil.copytree(ROOT / "dags_examples" / "jobs", tmp_path / "jobs")
    # The package under test (this checkout's, not whichever one the venv installed), and
    # nothing else of the checkout: a symlink to it alone is what goes on the path.
    site = tmp_path.parent / f"{tmp_path.name}-site"
    site.mkdir()
    (site / "airflow_t9k").symlink_to(ROOT / "airflow_t9k")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(site)}
    code = ("import json, sys; from airflow.dag_processing.dagbag import DagBag; b = DagBag(dag_folder=sys.argv[1]); "
            "print(json.dumps({'errors': {k: str(v)[-300:] for k, v in b.import_errors.items()}, "
            "'dags': sorted(b.dags)}))")  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert set(result["dags"]) == EXPECTED
