"""TIJobOperator against the real API server and controller: seed 004's tfplus example as written."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.ti import TIJobOperator
from tests.integration.test_operator_trigger import conn  # noqa: F401 - conn is a fixture
from tests.support.cluster import wait_until
from tests.support.task import context

SEED_COMMAND = "python /scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py --model resnet50 --batch_size 32 --variable_update tfplus"


def test_seed_tfplus_distributed_example_runs_three_workers_and_reports_like_ti(conn, jobs, controller):
    # tictl job create test73 --command="..." --runtime=tfplus-1.6.0-gpu --wcount=3 --workertype=0U0G2P
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = TIJobOperator(task_id="train", command=SEED_COMMAND, runtime_version="tfplus-1.6.0-gpu", worker_count=3,
                           worker_type="0U0G2P", runtime_images={"tfplus-1.6.0-gpu": "busybox"}, deferrable=False,
                           pod_annotations={"sim.t9k.test/duration": "5s"})  # fmt: skip
    ctx = context()
    out = op.execute(ctx)
    assert out["phase"] == "Succeeded"
    # TI's states in order, Running while it ran (issue 47, item 5: before, Created then the end).
    assert [v for k, v in ctx["ti"].pushed if k == "ti_state"] == ["Created", "Running", "Succeeded"]
    name = out["name"]
    job = jobs.get("TensorFlowTrainingJob", name)
    tasks = job["status"]["tasks"]
    assert [(t["type"], [r["name"] for r in t["status"]]) for t in tasks] == [
        ("worker", [f"{name}-worker-{i}" for i in range(3)])
    ]
    pod = jobs.pods(name)[f"{name}-worker-0"]  # kept: it succeeded (cleanUpPolicy Unfinished)
    assert pod.spec.containers[0].command == SEED_COMMAND.split()
    assert pod.spec.containers[0].resources.limits == {"nvidia.com/gpu": "2"}
    report = ctx["ti"].xcom["ti_job"]
    assert (report["name"], report["state"], report["namespace"]) == (name, "Succeeded", jobs.ns)
    assert report["cluster"]
    assert report["cluster"].startswith("https://")
    assert report["createTime"]
    assert report["startTime"]
    assert report["endTime"]
    assert report["createTime"] <= report["startTime"] <= report["endTime"]


def test_name_default_runtime_and_package_dir_reach_the_pods(conn, jobs, controller):
    """Seed 004's name as the job's name, runtimeVersion left out, and a package on a claim that is
    the command's working directory: the API server takes the pods as the controller builds them."""
    # The claim does not exist here, so the pod is not scheduled: submit without waiting, and
    # read back the pod the controller created from the job.
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = TIJobOperator(task_id="train", name="test73", command="python train.py", package_dir=["pvc://code/mnist"],
                           master_type="1U2G0P", deferrable=False, wait_for_completion=False, timeout=60)  # fmt: skip
    out = op.execute(context())
    assert out["name"] == "test73"
    wait_until(lambda: "test73-chief-0" in jobs.pods("test73"), timeout=30, what="chief pod")
    container = jobs.pods("test73")["test73-chief-0"].spec.containers[0]
    assert container.image == "tensorflow/tensorflow:1.7.0-py3"
    assert container.working_dir == "/ti/packages/0"
    assert [(m.name, m.mount_path, m.sub_path) for m in container.volume_mounts if m.name.startswith("ti-")] == [
        ("ti-package-0", "/ti/packages/0", "mnist")
    ]
    assert container.resources.limits == {"cpu": "1", "memory": "2G"}
