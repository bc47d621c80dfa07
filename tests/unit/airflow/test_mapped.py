"""Mapped tasks (``partial().expand()``, a hyperparameter sweep) render as unmapped ones do.

Airflow renders a mapped task by calling ``_do_render_template_fields`` on the unmapped task,
not ``render_template_fields``: the literal-argument rule and ``rendered_job`` must hold there
too. Rendered the way the task runner renders them, from a task-instance context."""

from __future__ import annotations

import types
from datetime import datetime

import pytest
import yaml
from airflow.sdk import DAG

from airflow_t9k.operators.job import T9kJobOperator, job_name
from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator
from tests.unit.airflow.test_operators import FakeTI

LRS = ["0.1", "0.03", "0.01", "0.003"]


def _render(mapped, dag, map_index):
    ti = FakeTI(dag_id=dag.dag_id, task_id=mapped.task_id, map_index=map_index)
    context = {"ti": ti, "task_instance": ti, "task": mapped, "dag": dag, "params": {}, "run_id": ti.run_id,
               "dag_run": types.SimpleNamespace(conf={})}  # fmt: skip
    mapped.render_template_fields(context)
    return context["task"]  # the unmapped task the runner executes


@pytest.mark.parametrize("map_index", range(len(LRS)))
def test_a_sweep_renders_each_map_index_with_literal_file_like_arguments(map_index):
    with DAG("sweep", start_date=datetime(2026, 1, 1), schedule=None) as dag:
        mapped = PyTorchTrainingJobOperator.partial(
            task_id="train", image="img", namespace="ml", command=["deepspeed", "train.py", "--deepspeed_config=ds.json"],
        ).expand(args=[["--lr", lr] for lr in LRS])  # fmt: skip
    task = _render(mapped, dag, map_index)
    job = task.rendered_job
    assert job is not None  # the Rendered Template view of a mapped task shows its job
    container = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    assert container["command"] == ["deepspeed", "train.py", "--deepspeed_config=ds.json"]
    assert container["args"] == ["--lr", LRS[map_index]]
    assert job["metadata"]["name"] == job_name("sweep", FakeTI().run_id, "train", map_index)
    assert job["metadata"]["labels"]["airflow-t9k.io/map-index"] == str(map_index)


def test_a_mapped_job_file_is_still_read_as_a_template_file(tmp_path):
    (tmp_path / "job.yaml").write_text("kind: GenericJob\nspec: {args: ['--conf=c.yaml', '{{ ti.map_index }}']}\n")
    with DAG("sweep", start_date=datetime(2026, 1, 1), schedule=None, template_searchpath=[str(tmp_path)]) as dag:
        mapped = T9kJobOperator.partial(task_id="t", job="job.yaml").expand(namespace=["a", "b"])
    task = _render(mapped, dag, 1)
    assert yaml.safe_load(task.job)["spec"]["args"] == ["--conf=c.yaml", "1"]
    assert task.rendered_job["metadata"]["namespace"] == "b"
