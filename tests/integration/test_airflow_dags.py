"""Whole DAGs under real Airflow 3.3 (`airflow dags test`, triggers run in-process) against
the local cluster, with the controller running."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import dags_test
from tests.support.airflow import NO_MIGRATION_CHECK, migrated_database
from tests.support.cluster import own_namespace
from tests.support.controller import ControllerProcess
from tests.support.jobs import Jobs

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


def ended_ok(out: str, ended: str) -> str:
    """``ok`` for a DAG run by ``runs`` below."""
    assert ended == "ok", out[-4000:]
    assert "DagRun Finished" in out, out[-4000:]
    assert "state=success" in out, out[-4000:]
    return out


# example_pod_options runs in its own test below, which checks its pods too.
EXAMPLES = ["example_genericjob", "example_pytorch", "example_tensorflow", "example_xgboost", "example_colossalai", "example_ti",
            "example_mpi", "example_ascend", "example_beam", "example_deepspeed", "example_yaml_and_sensor"]  # fmt: skip
EXAMPLE_SHARES = 4
# The other tests' DAGs, each test's in a namespace of its own: (DAG id, conf) run one after the other.
OWN = {
    "retraining": [("retraining_pipeline", {"candidate_metric": 0.99}), ("retraining_pipeline", {"candidate_metric": 0.5})],
    "failing": [("t9k_failing", {})],
    "pod_options": [("example_pod_options", {})],
    "results": [("t9k_results", {})],
}


@dataclass
class Runs:
    out: dict[str, tuple[str, str]]  # by key (a DAG id, or "<test>#<n>"): its output, how its command ended
    namespaces: dict[str, str]  # "examples" and each of OWN: the namespace its jobs went to
    dbs: dict[str, Path]  # each of OWN: its Airflow database


@pytest.fixture(scope="module")
def runs(airflow_home, cluster, core, crds) -> Iterator[Runs]:
    """Every DAG of this module's tests under `airflow dags test`, at once, in forks of one
    process (tests/support/dags_test.py: Airflow's imports and its in-process Execution API
    built once, before the fork), each fork on a database of its own, against one controller.
    The examples share a namespace (their jobs have different names) and go out in
    ``EXAMPLE_SHARES`` forks; each other test's DAGs run in a fork and a namespace of their own.
    Their replicas wait on kwok's simulated durations, so what one after the other took 206 s
    (the examples) plus some 190 s (the other tests, one `dags test` process each) takes about
    the longest fork's time."""
    with contextlib.ExitStack() as stack:
        namespaces = {name: stack.enter_context(own_namespace(cluster, core)) for name in ("examples", *OWN)}
        others = [arg for name in OWN for arg in ("-n", namespaces[name])]
        controller = ControllerProcess(cluster.kubeconfig, namespaces["examples"], LOG_DIR, *others).start()
        stack.callback(controller.stop)
        dags = airflow_home / "dags"
        shares, dbs = [], {}

        def share(label: str, namespace: str, runs: list[dict]) -> None:
            db = airflow_home / f"{label}.db"
            migrated_database(db)
            conn = base_env(airflow_home, cluster.kubeconfig, namespace)["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
            shares.append({"db": str(db), "env": {"AIRFLOW_CONN_KUBERNETES_DEFAULT": conn}, "dags": runs})
            dbs[label] = db

        for i in range(EXAMPLE_SHARES):
            share(f"examples-{i}", namespaces["examples"],
                  [{"id": d, "file": str(dags / f"{d}.py")} for d in EXAMPLES[i::EXAMPLE_SHARES]])  # fmt: skip
        for name, dag_runs in OWN.items():
            share(name, namespaces[name], [{"key": f"{name}#{n}", "id": d, "file": str(dags / f"{d}.py"), "conf": conf}
                                           for n, (d, conf) in enumerate(dag_runs, 1)])  # fmt: skip
        plan = airflow_home / "plan.json"
        plan.write_text(json.dumps(shares))
        env = base_env(airflow_home, cluster.kubeconfig, namespaces["examples"])
        result = subprocess.run([sys.executable, "-m", "tests.support.dags_test", str(plan)], check=False, env=env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)  # fmt: skip
        yield Runs(dags_test.split(result.stdout), namespaces, {name: dbs[name] for name in OWN})


@pytest.mark.parametrize("dag_id", EXAMPLES)
def test_example_dag_runs_to_success(runs, dag_id):
    out = ended_ok(*runs.out.get(dag_id, ("", "never ran")))
    assert "Pausing task as DEFERRED" in out or dag_id == "example_yaml_and_sensor"
    assert "[event] Normal Succeeded" in out or dag_id == "example_yaml_and_sensor"


def test_retraining_pipeline_promotes_then_keeps(runs, api_client):
    jobs = Jobs(api_client, runs.namespaces["retraining"])
    first = ended_ok(*runs.out.get("retraining#1", ("", "never ran")))
    assert "promoted model with metric 0.9900" in first
    second = ended_ok(*runs.out.get("retraining#2", ("", "never ran")))
    assert "kept the production model" in second
    # Each training updated the candidate asset with an event whose extra is its job's result; only
    # the promotion updated the production asset, and the champion is kept in its asset state.
    import sqlite3

    def events(uri: str) -> list[tuple[str, dict]]:
        with sqlite3.connect(runs.dbs["retraining"]) as db:
            rows = db.execute("select e.source_task_id, e.extra from asset_event e join asset a on a.id = e.asset_id "
                              "where a.uri = ? and e.source_dag_id = 'retraining_pipeline' order by e.id",
                              (uri,)).fetchall()  # fmt: skip
        return [(r[0], json.loads(r[1])) for r in rows]

    production = events("s3://models/clicks-ranker")
    assert [(task, e["metric"], e["previous_metric"]) for task, e in production] == [("promote", 0.99, None)], production
    with sqlite3.connect(runs.dbs["retraining"]) as db:
        (champion,) = db.execute("select s.value from asset_state_store s join asset a on a.id = s.asset_id "
                                 "where a.uri = 's3://models/clicks-ranker' and s.key = 'champion'").fetchone()  # fmt: skip
    champion = json.loads(champion)
    assert champion["metric"] == 0.99, champion
    assert champion["model_uri"] == production[0][1]["model_uri"]
    extras = [e for _, e in events("s3://models/clicks-ranker/candidates")]
    assert [e["metric"] for e in extras] == [0.99, 0.5], extras
    assert all(e["model_uri"].startswith("s3://models/clicks-ranker/manual__") for e in extras), extras
    assert {e["t9k_job"]["kind"] for e in extras} == {"PyTorchTrainingJob"}
    # One training job per run, each the one its run's event names.
    pt = jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns, "pytorchtrainingjobs")["items"]
    by_name = {j["metadata"]["name"]: j for j in pt}
    assert sorted(by_name) == sorted(e["t9k_job"]["name"] for e in extras)
    job = by_name[extras[0]["t9k_job"]["name"]]
    assert job["status"]["phase"] == "Succeeded"
    # cleanUpPolicy Unfinished may remove a replica still running when the master finished;
    # the master (rank 0) has succeeded and stays.
    name = job["metadata"]["name"]
    master = jobs.pods(name)[f"{name}-worker-0"]
    env = {e.name: e.value for e in master.spec.containers[0].env}
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("0", "2", f"{name}-worker-0")


def test_failing_job_fails_the_task_with_the_reason(runs):
    out, _ = runs.out.get("failing#1", ("", "never ran"))
    assert "state=failed" in out
    assert 'The job is failed with rule: { "worker": [1] }' in out
    assert "failed replicas:" in out
    assert "-worker-1" in out
    assert "exit code 137 (OOMKilled)" in out
    assert "torch.cuda.OutOfMemoryError: CUDA out of memory" in out  # the replica's termination message


def test_pod_options_example_puts_volume_toleration_and_shm_on_every_replica(runs, api_client):
    jobs = Jobs(api_client, runs.namespaces["pod_options"])
    out = ended_ok(*runs.out.get("pod_options#1", ("", "never ran")))
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

    with sqlite3.connect(runs.dbs["pod_options"]) as db:
        rows = db.execute(
            "select rendered_fields from rendered_task_instance_fields where dag_id = 'example_pod_options'"
        ).fetchall()
    rendered = json.loads(rows[-1][0])["rendered_job"]
    rendered = rendered if isinstance(rendered, dict) else __import__("yaml").safe_load(rendered)
    assert rendered["metadata"]["name"] == job["metadata"]["name"]
    assert rendered["spec"]["replicaSpecs"][0]["template"]["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_results_reach_the_next_task_through_xcom(runs):
    out = ended_ok(*runs.out.get("results#1", ("", "never ran")))
    assert "every result arrived: ['colossalai', 'deepspeed', 'mpi', 'pytorch', 'sync', 'text']" in out
