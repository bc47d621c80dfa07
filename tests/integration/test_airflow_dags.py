"""Whole DAGs under real Airflow 3.3 (`airflow dags test`, triggers run in-process) against
the local cluster, with the controller running."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import dags_test
from tests.support.airflow import NO_MIGRATION_CHECK, migrated_database
from tests.support.cluster import own_namespace
from tests.support.controller import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW = Path(sys.executable).parent / "airflow"
LOG_DIR = ROOT / ".local-cluster" / "test-logs"  # the controllers' logs, as tests/integration/conftest.py keeps them


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("airflow-home")
    dags = home / "dags"
    shutil.copytree(ROOT / "dags_examples", dags)
    for extra in (ROOT / "tests" / "integration" / "dags").glob("*.py"):
        shutil.copy(extra, dags)
    migrated_database(home / "airflow.db")
    return home


def base_env(home: Path, kubeconfig: Path, namespace: str) -> dict[str, str]:
    """`airflow dags test`'s environment: the home, and a connection to ``namespace``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    extra = {"kube_config_path": str(kubeconfig), "namespace": namespace}
    env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps({"conn_type": "kubernetes", "extra": extra})
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        PYTHONPATH=f"{home}:{ROOT}",
        **NO_MIGRATION_CHECK,
        # The hold is for a scheduler's race (apache/airflow#72716); `dags test` runs the
        # triggers in its own process, with no scheduler: no hold, as in tests/conftest.py.
        AIRFLOW__T9K__DEFERRAL_HOLD_SECONDS="0",
    )
    return env


@pytest.fixture
def run_dag(airflow_home, cluster, namespace, controller):
    def run(dag_id: str, **conf) -> subprocess.CompletedProcess[str]:
        env = base_env(airflow_home, cluster.kubeconfig, namespace)
        args = [str(AIRFLOW), "dags", "test", dag_id]
        if (airflow_home / "dags" / f"{dag_id}.py").exists():  # parse that file only, not the folder's 19
            args += ["-f", str(airflow_home / "dags" / f"{dag_id}.py")]
        if conf:
            args += ["--conf", json.dumps(conf)]
        return subprocess.run(args, check=False, env=env, capture_output=True, text=True, timeout=300)

    return run


def ok(result: subprocess.CompletedProcess[str]) -> str:
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "DagRun Finished" in out, out[-4000:]
    assert "state=success" in out, out[-4000:]
    return out


# example_pod_options runs in its own test below, which checks its pods too.
EXAMPLES = ["example_genericjob", "example_pytorch", "example_tensorflow", "example_xgboost", "example_colossalai", "example_ti",
            "example_mpi", "example_ascend", "example_beam", "example_deepspeed", "example_yaml_and_sensor"]  # fmt: skip


# The examples' replicas run 15 s each (their kwok duration, as users see it in the demo): run
# one after the other, the eleven took 206 s (30 CPU-seconds); in four forks of one process at
# once, 79 s (37 CPU-seconds), measured on 2026-11-28.
SHARDS = 4


@pytest.fixture(scope="module")
def examples(airflow_home, cluster, core, crds) -> dict[str, tuple[str, str]]:
    """Every example DAG under `airflow dags test` in one process forked ``SHARDS`` times, each
    child with a database of its own (tests/support/dags_test.py: Airflow's imports and its
    in-process Execution API built once, before the fork), against one namespace and one
    controller: each DAG's output and end."""
    with own_namespace(cluster, core) as namespace:
        controller = ControllerProcess(cluster.kubeconfig, namespace, LOG_DIR).start()
        try:
            env = base_env(airflow_home, cluster.kubeconfig, namespace)
            dbs = []
            for shard in range(SHARDS):
                migrated_database(airflow_home / f"examples-{shard}.db")
                dbs += ["--db", str(airflow_home / f"examples-{shard}.db")]
            specs = [f"{d}={airflow_home / 'dags' / f'{d}.py'}" for d in EXAMPLES]
            command = [sys.executable, "-m", "tests.support.dags_test", *dbs, *specs]
            result = subprocess.run(command, check=False, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, timeout=900)  # fmt: skip
            return dags_test.split(result.stdout)
        finally:
            controller.stop()


@pytest.mark.parametrize("dag_id", EXAMPLES)
def test_example_dag_runs_to_success(examples, dag_id):
    out, ended = examples.get(dag_id, ("", "never ran"))
    assert ended == "ok", out[-4000:]
    assert "DagRun Finished" in out, out[-4000:]
    assert "state=success" in out, out[-4000:]
    assert "Pausing task as DEFERRED" in out or dag_id == "example_yaml_and_sensor"
    assert "[event] Normal Succeeded" in out or dag_id == "example_yaml_and_sensor"


def test_retraining_pipeline_promotes_then_keeps(run_dag, jobs, airflow_home):
    first = ok(run_dag("retraining_pipeline", candidate_metric=0.99))
    assert "promoted model with metric 0.9900" in first
    pt = jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns, "pytorchtrainingjobs")["items"]
    assert len(pt) == 1
    assert pt[0]["status"]["phase"] == "Succeeded"
    # cleanUpPolicy Unfinished may remove a replica still running when the master finished;
    # the master (rank 0) has succeeded and stays.
    master = jobs.pods(pt[0]["metadata"]["name"])[f"{pt[0]['metadata']['name']}-worker-0"]
    env = {e.name: e.value for e in master.spec.containers[0].env}
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("0", "2", f"{pt[0]['metadata']['name']}-worker-0")
    second = ok(run_dag("retraining_pipeline", candidate_metric=0.5))
    assert "kept the production model" in second
    # Each training updated the model asset with an event whose extra is its job's result.
    import sqlite3

    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute("select e.extra from asset_event e join asset a on a.id = e.asset_id "
                          "where a.uri = 's3://models/clicks-ranker' and e.source_dag_id = 'retraining_pipeline' "
                          "order by e.id").fetchall()  # fmt: skip
    extras = [json.loads(r[0]) for r in rows][-2:]
    assert [e["metric"] for e in extras] == [0.99, 0.5], extras
    assert all(e["model_uri"].startswith("s3://models/clicks-ranker/manual__") for e in extras), extras
    assert extras[0]["t9k_job"]["name"] == pt[0]["metadata"]["name"]
    assert extras[0]["t9k_job"]["kind"] == "PyTorchTrainingJob"


def test_failing_job_fails_the_task_with_the_reason(run_dag, jobs):
    result = run_dag("t9k_failing")
    out = result.stdout + result.stderr
    assert "state=failed" in out
    assert 'The job is failed with rule: { "worker": [1] }' in out
    assert "failed replicas:" in out
    assert "-worker-1" in out
    assert "exit code 137 (OOMKilled)" in out
    assert "torch.cuda.OutOfMemoryError: CUDA out of memory" in out  # the replica's termination message


def test_pod_options_example_puts_volume_toleration_and_shm_on_every_replica(run_dag, jobs, airflow_home):
    out = ok(run_dag("example_pod_options"))
    assert "Pausing task as DEFERRED" in out
    assert "[event] Normal Succeeded" in out
    [job] = jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns, "pytorchtrainingjobs")["items"]
    name = job["metadata"]["name"]
    pods = jobs.pods(name)
    # cleanUpPolicy's default (Unfinished) may delete the replica still running when the master
    # finished; the master (rank 0) has succeeded and stays.
    assert f"{name}-worker-0" in pods
    assert set(pods) <= {f"{name}-worker-0", f"{name}-worker-1"}
    for pod in pods.values():
        volumes = {v.name: v for v in pod.spec.volumes}
        assert volumes["data"].empty_dir is not None
        assert volumes["airflow-t9k-shm"].empty_dir.medium == "Memory"
        assert {m.mount_path for m in pod.spec.containers[0].volume_mounts} >= {"/data", "/dev/shm"}
        assert any(t.key == "nvidia.com/gpu" for t in pod.spec.tolerations)
        assert pod.spec.containers[0].command[:2] == ["python", "train.py"]
    # the Rendered Template view shows the manifest as submitted (rendered_job)
    import sqlite3

    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute(
            "select rendered_fields from rendered_task_instance_fields where dag_id = 'example_pod_options'"
        ).fetchall()
    rendered = json.loads(rows[-1][0])["rendered_job"]
    rendered = rendered if isinstance(rendered, dict) else __import__("yaml").safe_load(rendered)
    assert rendered["metadata"]["name"] == job["metadata"]["name"]
    assert rendered["spec"]["replicaSpecs"][0]["template"]["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_results_reach_the_next_task_through_xcom(run_dag, jobs):
    out = ok(run_dag("t9k_results"))
    assert "every result arrived: ['colossalai', 'deepspeed', 'mpi', 'pytorch', 'sync', 'text']" in out
