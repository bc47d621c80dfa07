"""TIJobOperator: TI fields -> a TensorFlowTrainingJob; clear errors before anything is submitted."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG

from airflow_t9k.operators.ti import TIJobOperator, default_runtime_image, ti_state
from tests.unit.airflow.test_operators import RecordingHook, ctx


def ti_op(**kw):
    kw.setdefault("command", ["python", "train.py"])
    kw.setdefault("runtime_version", "tf-1.6.0-gpu-py3")
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return TIJobOperator(task_id="train", namespace="ml", **kw)


def test_ti_job_becomes_a_tensorflow_job_with_chief_workers_and_ps():
    job = ti_op(master_type="1U2G1P", worker_type="2U8G1P", parameter_server_type="1U2G0P", worker_count=3,
                parameter_server_count=2, args=["--epochs", "3"], package_dir=["cos://b/code", "cos://b/data"]).render_job(ctx())  # fmt: skip
    assert job["kind"] == "TensorFlowTrainingJob"
    specs = {s["type"]: s for s in job["spec"]["replicaSpecs"]}
    assert {t: s["replicas"] for t, s in specs.items()} == {"chief": 1, "worker": 3, "ps": 2}
    worker = specs["worker"]["template"]["spec"]["containers"][0]
    assert (worker["name"], worker["image"]) == ("tensorflow", "tensorflow/tensorflow:1.6.0-gpu-py3")
    assert worker["resources"]["limits"] == {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}
    assert worker["args"] == ["--epochs", "3"]
    assert {"name": "TI_PACKAGE_DIR", "value": "cos://b/code,cos://b/data"} in worker["env"]
    assert "resources" in specs["ps"]["template"]["spec"]["containers"][0]


def test_single_machine_and_empty_machine_type():
    job = ti_op().render_job(ctx())
    assert [s["type"] for s in job["spec"]["replicaSpecs"]] == ["chief"]
    assert "resources" not in job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("runtime", "image"),
    [("tf-1.6.0-gpu-py3", "tensorflow/tensorflow:1.6.0-gpu-py3"), ("tf-1.4.0", "tensorflow/tensorflow:1.4.0"),
     ("tf-1.7.0-py3", "tensorflow/tensorflow:1.7.0-py3"), ("tia-1.6.0-py3", None), ("tfplus-1.6.0-gpu", None), ("tf-x", None)],
)  # fmt: skip
def test_default_runtime_images(runtime, image):
    assert default_runtime_image(runtime) == image


def test_runtime_map_is_configurable():
    op = ti_op(runtime_version="tia-1.6.0-py3", runtime_images={"tia-1.6.0-py3": "registry.example/tia:1.6.0-py3"})
    assert op.render_job(ctx())["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] == "registry.example/tia:1.6.0-py3"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"runtime_version": "tia-1.6.0"}, "runtime 'tia-1.6.0' has no image"),
        ({"runtime_version": "pytorch-2"}, "has no image"),
        ({"worker_type": "2U8G"}, "worker machine type: machine type '2U8G' is not of the form aUbGcP"),
        ({"master_type": "1U2G1.5P"}, "master machine type"),
        ({"worker_count": -1}, "worker_count must be a non-negative integer"),
        ({"parameter_server_count": "2"}, "parameter_server_count"),
        ({"command": []}, "command is required"),
        ({"runtime_version": "tfplus-1.6.0-gpu", "runtime_images": {"tfplus-1.6.0-gpu": "x"}, "master_type": "0U0G1P",
          "parameter_server_count": 1}, "without parameter servers"),
        ({"runtime_version": "tfplus-1.6.0-gpu", "runtime_images": {"tfplus-1.6.0-gpu": "x"}, "master_type": "2U4G0P"},
         "at least one GPU"),
    ],
)  # fmt: skip
def test_malformed_input_is_an_error_before_submission(kwargs, error):
    with pytest.raises(ValueError, match=error.replace("(", r"\(").replace(")", r"\)")):
        ti_op(**kwargs)


@pytest.mark.parametrize(("phase", "state"), [(None, "Created"), ("Pending", "Created"), ("Running", "Running"),
                                              ("Succeeded", "Succeeded"), ("Failed", "Failed"), ("Paused", "Running")])  # fmt: skip
def test_ti_state_names(phase, state):
    assert ti_state(phase) == state


def test_ti_state_pushed_on_completion():
    c = ctx()
    ev = {"status": "success", "kind": "TensorFlowTrainingJob", "name": "j", "namespace": "ml", "uid": "u", "phase": "Succeeded",
          "message": "", "state": {"phase": "Succeeded"}, "logs": {}}  # fmt: skip
    op = ti_op()
    op._hook = RecordingHook()  # completion marks the job consumed; the writes are not what this tests
    op.execute_complete(c, ev)
    assert c["ti"].xcom["ti_state"] == "Succeeded"
