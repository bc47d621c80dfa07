"""TIJobOperator: TI fields -> a TensorFlowTrainingJob; clear errors before anything is submitted."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG

from airflow_t9k.kinds.registry import KINDS
from airflow_t9k.operators.ti import TIJobOperator, default_runtime_image, ti_state
from tests.unit.airflow.test_operators import RecordingHook, Store, ctx


def ti_op(**kw):
    kw.setdefault("command", ["python", "train.py"])
    kw.setdefault("runtime_version", "tf-1.6.0-gpu-py3")
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return TIJobOperator(task_id="train", namespace="ml", **kw)


def test_ti_job_becomes_a_tensorflow_job_with_chief_workers_and_ps():
    job = ti_op(master_type="1U2G1P", worker_type="2U8G1P", parameter_server_type="1U2G0P", worker_count=3,
                parameter_server_count=2, args=["--epochs", "3"],
                package_dir=["pvc://code/mnist", "/data"]).render_job(ctx())  # fmt: skip
    assert job["kind"] == "TensorFlowTrainingJob"
    specs = {s["type"]: s for s in job["spec"]["replicaSpecs"]}
    assert {t: s["replicas"] for t, s in specs.items()} == {"chief": 1, "worker": 3, "ps": 2}
    worker = specs["worker"]["template"]["spec"]["containers"][0]
    assert (worker["name"], worker["image"]) == ("tensorflow", "tensorflow/tensorflow:1.6.0-gpu-py3")
    assert worker["resources"]["limits"] == {"cpu": "2", "memory": "8G", "nvidia.com/gpu": "1"}
    assert worker["args"] == ["--epochs", "3"]
    assert {"name": "TI_PACKAGE_DIR", "value": "/ti/packages/0,/data"} in worker["env"]
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
    assert (
        op.render_job(ctx())["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"]
        == "registry.example/tia:1.6.0-py3"
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"runtime_version": "tia-1.6.0"}, "runtime 'tia-1.6.0' has no image: tia-. and tfplus-. are Tencent Cloud's own images"),
        ({"runtime_version": "tiaserv-1.6.0-gpu"}, "a TI serving environment"),
        ({"package_dir": ["cos://bucket/code"]}, "copy the package to a PersistentVolumeClaim and write pvc://"),
        ({"package_dir": ["code"]}, "relative paths cannot be reached"),
        ({"package_dir": ["pvc://Bad_Claim/x"]}, "valid claim name"),
        ({"name": "Test_73"}, "must be a Kubernetes object name"),
        ({"cluster": "cls-a", "kubernetes_conn_id": "cls-b"}, "name two clusters"),
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
                                              ("Succeeded", "Succeeded"), ("Failed", "Failed"),
                                              ("Paused", "Running")])  # fmt: skip
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


# -- fidelity to seed 004 (items 10-12) -----------------------------------------------------

TFPLUS = {"runtime_version": "tfplus-1.6.0-gpu", "runtime_images": {"tfplus-1.6.0-gpu": "registry.example/tfplus:1.6.0-gpu"}}
SEED_COMMAND = "python /scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py --model resnet50 --batch_size 32 --variable_update tfplus"


@pytest.mark.parametrize(
    ("command", "args", "argv", "rest"),
    [
        ("python train.py", None, ["python", "train.py"], None),
        (SEED_COMMAND, None, SEED_COMMAND.split(), None),
        ("python 'my script.py'", "--epochs 3 --name 'a b'", ["python", "my script.py"], ["--epochs", "3", "--name", "a b"]),
        (["python", "train.py"], ["--epochs", "3"], ["python", "train.py"], ["--epochs", "3"]),
    ],
    ids=["string", "seed-tictl-command", "quoted-words", "lists"],
)
def test_command_and_args_strings_are_split_like_a_shell(command, args, argv, rest):
    # `TIJobOperator(command="python train.py")` used to run ["p", "y", "t", ...].
    container = ti_op(command=command, args=args).render_job(ctx())["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][
        0
    ]
    assert container["command"] == argv
    assert container.get("args") == rest


def test_unbalanced_quotes_are_an_error_at_parse_time():
    with pytest.raises(ValueError, match="cannot be split like a shell command"):
        ti_op(command="python 'train.py")


def test_seed_tfplus_distributed_example_runs_three_workers_and_no_chief():
    # tictl job create ... --runtime=tfplus-1.6.0-gpu --wcount=3 --workertype=0U0G2P (no master type)
    job = ti_op(command=SEED_COMMAND, worker_count=3, worker_type="0U0G2P", **TFPLUS).render_job(ctx())
    specs = job["spec"]["replicaSpecs"]
    assert [(s["type"], s["replicas"]) for s in specs] == [("worker", 3)]
    container = specs[0]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert container["image"] == "registry.example/tfplus:1.6.0-gpu"
    job["metadata"] = {"name": "tfplus", "namespace": "ml", "uid": "u"}
    KINDS["TensorFlowTrainingJob"].validate(job)  # worker 0 decides
    assert KINDS["TensorFlowTrainingJob"].master(job) == ("worker", 0)


@pytest.mark.parametrize(
    ("kwargs", "types"),
    [
        ({"master_type": "0U0G1P"}, [("chief", 1)]),
        ({"master_type": "0U0G0P"}, None),
        ({"worker_count": 2, "worker_type": "1U2G1P"}, [("worker", 2)]),
    ],
    ids=["single-machine", "single-machine-without-gpu", "distributed"],
)
def test_tfplus_shapes(kwargs, types):
    if types is None:
        with pytest.raises(ValueError, match="at least one GPU per machine"):
            ti_op(**TFPLUS, **kwargs)
        return
    job = ti_op(**TFPLUS, **kwargs).render_job(ctx())
    assert [(s["type"], s["replicas"]) for s in job["spec"]["replicaSpecs"]] == types


def test_distributed_tfplus_refuses_a_master_type_rather_than_ignoring_it():
    with pytest.raises(ValueError, match="runs workers only"):
        ti_op(**TFPLUS, worker_count=3, worker_type="0U0G2P", master_type="0U0G1P")


@pytest.mark.parametrize("machine", ["0U0G0P", "", None])
def test_all_zero_machine_type_equals_an_empty_one(machine):
    job = ti_op(master_type=machine, worker_count=1, worker_type=machine).render_job(ctx())
    for spec in job["spec"]["replicaSpecs"]:
        assert "resources" not in spec["template"]["spec"]["containers"][0]


class TIHook(RecordingHook):
    def __init__(self, job):
        super().__init__()
        self.job = job

    def get_job(self, kind, name, namespace):
        self.calls.append(("get", name))
        return self.job


def test_ti_report_in_xcom():
    job = {"metadata": {"name": "j", "namespace": "ml", "creationTimestamp": "2026-11-25T12:00:00Z"},
           "status": {"phase": "Succeeded", "startTime": "2026-11-25T12:00:01Z", "conditions": [
               {"type": "Completed", "status": "True", "lastTransitionTime": "2026-11-25T12:05:00Z"},
               {"type": "Failed", "status": "False", "lastTransitionTime": "2026-11-25T12:05:00Z"}]}}  # fmt: skip
    c = ctx()
    c["task_state_store"] = Store(t9k_job={"kind": "TensorFlowTrainingJob", "name": "j", "namespace": "ml", "uid": "u",
                                           "server": "https://k8s.example:6443"})  # fmt: skip
    ev = {"status": "success", "kind": "TensorFlowTrainingJob", "name": "j", "namespace": "ml", "uid": "u", "phase": "Succeeded",
          "message": "phase Succeeded: done", "state": {"phase": "Succeeded"}, "logs": {}}  # fmt: skip
    op = ti_op()
    op._hook = TIHook(job)
    op.execute_complete(c, ev)
    assert c["ti"].xcom["ti_job"] == {
        "name": "j", "cluster": "https://k8s.example:6443", "namespace": "ml", "state": "Succeeded",
        "createTime": "2026-11-25T12:00:00Z", "startTime": "2026-11-25T12:00:01Z", "endTime": "2026-11-25T12:05:00Z",
        "message": "phase Succeeded: done",
    }  # fmt: skip


# -- fidelity to seed 004, round 3 ----------------------------------------------------------


def test_name_is_the_jobs_exact_name_as_in_ti():
    assert ti_op(name="test73").render_job(ctx())["metadata"]["name"] == "test73"
    suffixed = ti_op(name="test73", name_suffix=True).render_job(ctx())["metadata"]["name"]
    assert suffixed.startswith("test73-")
    assert suffixed != "test73"


@pytest.mark.parametrize(
    ("kwargs", "image"),
    [({}, "tensorflow/tensorflow:1.7.0-py3"), ({"master_type": "1U2G1P"}, "tensorflow/tensorflow:1.7.0-gpu-py3"),
     ({"worker_count": 1, "worker_type": "0U0G2P"}, "tensorflow/tensorflow:1.7.0-gpu-py3")],
    ids=["cpu", "gpu-master", "gpu-worker"],
)  # fmt: skip
def test_runtime_version_is_optional_as_in_the_seed(kwargs, image):
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = TIJobOperator(task_id="train", namespace="ml", command="python train.py", **kwargs)
    container = op.render_job(ctx())["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    assert container["image"] == image


def test_package_dir_is_mounted_and_the_command_runs_there():
    """A package-relative command (``python train.py``) finds its code: the claim's path is the working directory."""
    job = ti_op(
        command="python train.py", package_dir=["pvc://code/mnist", "pvc://data", "/opt/extra"], worker_count=1
    ).render_job(ctx())
    for spec in job["spec"]["replicaSpecs"]:
        pod = spec["template"]["spec"]
        container = pod["containers"][0]
        assert container["workingDir"] == "/ti/packages/0"
        assert container["volumeMounts"] == [{"name": "ti-package-0", "mountPath": "/ti/packages/0", "subPath": "mnist"},
                                             {"name": "ti-package-1", "mountPath": "/ti/packages/1"}]  # fmt: skip
        assert pod["volumes"] == [{"name": "ti-package-0", "persistentVolumeClaim": {"claimName": "code"}},
                                  {"name": "ti-package-1", "persistentVolumeClaim": {"claimName": "data"}}]  # fmt: skip
        assert {"name": "TI_PACKAGE_DIR", "value": "/ti/packages/0,/ti/packages/1,/opt/extra"} in container["env"]


def test_a_package_dir_in_the_image_is_the_working_directory_without_volumes():
    container = ti_op(package_dir=["/workspace/code"]).render_job(ctx())["spec"]["replicaSpecs"][0]["template"]["spec"][
        "containers"
    ][0]
    assert container["workingDir"] == "/workspace/code"
    assert "volumeMounts" not in container


def test_cluster_is_the_connection_to_run_on_and_is_reported():
    op = ti_op(cluster="cls-rgaisoe4")
    assert op.kubernetes_conn_id == "cls-rgaisoe4"
    c = ctx()
    ev = {"status": "success", "kind": "TensorFlowTrainingJob", "name": "j", "namespace": "ml", "uid": "u", "phase": "Succeeded",
          "message": "", "state": {"phase": "Succeeded"}, "logs": {}}  # fmt: skip
    op._hook = TIHook(None)
    op.execute_complete(c, ev)
    assert c["ti"].xcom["ti_job"]["cluster"] == "cls-rgaisoe4"
