"""Task Loops (Airflow 3.4, AIP-111): every iteration of a loop trains a job of its own, and a task
outside a loop keeps the names, labels, records and directories it always had (Airflow 3.3)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from airflow_t9k.api import checkpoint as ckpt
from airflow_t9k.api.follow import choose
from airflow_t9k.compat import loop_iteration
from airflow_t9k.operators.kinds import GenericJobOperator
from airflow_t9k.operators.manifest import LOOP_ITERATION, STATE_KEY, SUBMITTING_KEY, job_name
from tests.support.task import Store
from tests.unit.airflow.test_operators import FakeTI, op
from tests.unit.airflow.test_rerun import Cluster, _ti

RUN = "manual__2026-11-25T10:00:00+00:00"


def loop(index: int) -> SimpleNamespace:
    """What a task inside a loop finds as ``context["loop"]`` (its ``index`` is all that is read)."""
    return SimpleNamespace(index=index, max_iterations=3)


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({}, None),  # Airflow 3.3, or a task outside a loop
        ({"loop": None}, None),
        ({"loop": loop(0)}, 0),
        ({"loop": loop(4)}, 4),
        ({"loop": SimpleNamespace(index=True)}, None),  # not an index
        ({"loop": SimpleNamespace(index=-1)}, None),
        ({"loop": SimpleNamespace()}, None),
        (object(), None),  # no mapping at all
    ],
)  # fmt: skip
def test_the_iteration_a_context_names(context, expected):
    assert loop_iteration(context) == expected


def test_the_iteration_of_airflows_own_loop_context():
    """The object Airflow 3.4 puts in the context (its LoopContextAccessor), read as it is."""
    accessor = pytest.importorskip("airflow.sdk.execution_time.loop", reason="Airflow 3.3 has no Task Loops").LoopContextAccessor
    from airflow.sdk.api.datamodels._generated import LoopContext

    made = LoopContext(node_id="refine", index=2, max_iterations=5, terminal_task_id="refine.train", terminal_is_mapped=False)
    assert loop_iteration({"loop": accessor(made, None)}) == 2


# -- names: the same as before outside a loop, one per iteration inside ---------------------------
@pytest.mark.parametrize(
    ("args", "base", "expected"),
    [
        (("dag", RUN, "train", -1), None, "train-4727839411"),
        (("dag", RUN, "train", 3), None, "train-a08eb13270"),
        (("sweep", "scheduled__1", "Train_Model.v2", -1), "mine", "mine-d1c390e6b0"),
        (("d", "r", "t", 0), None, "t-fc4d46e87b"),
    ],
)  # fmt: skip
def test_a_task_outside_a_loop_keeps_its_name(args, base, expected):
    """Literal names, computed by the version before Task Loops: a DAG upgraded with this package
    finds the jobs its earlier tries submitted (a retry reattaches, a Clear compares)."""
    assert job_name(*args, base=base) == expected
    assert job_name(*args, base=base, iteration=None) == expected


@pytest.mark.parametrize("map_index", [-1, 0, 3])
def test_every_iteration_has_a_name_of_its_own(map_index):
    names = [job_name("dag", RUN, "train", map_index, iteration=i) for i in (0, 1, 2)]
    assert len({*names, job_name("dag", RUN, "train", map_index)}) == 4
    assert names == [job_name("dag", RUN, "train", map_index, iteration=i) for i in (0, 1, 2)]  # deterministic
    assert all(n.startswith("train-") and len(n) <= 35 for n in names)


@pytest.mark.parametrize(("iteration", "loop_label"), [(None, None), (0, "0"), (1, "1")])
def test_the_rendered_job_names_and_labels_its_iteration(iteration, loop_label):
    context = {"ti": FakeTI(run_id=RUN), **({"loop": loop(iteration)} if iteration is not None else {})}
    job = op().render_job(context)
    meta = job["metadata"]
    assert meta["name"] == job_name("dag", RUN, "train", -1, iteration=iteration)
    assert meta["labels"].get(LOOP_ITERATION) == loop_label
    assert meta["annotations"].get(LOOP_ITERATION) == loop_label
    if iteration is None:  # as before: no key of the loop's at all
        assert meta["name"] == "train-4727839411"
        assert not [k for k in (*meta["labels"], *meta["annotations"]) if "loop" in k]


@pytest.mark.parametrize(
    ("map_index", "iteration", "expected"),
    [
        (-1, None, "exp/dag/r/train"),
        (2, None, "exp/dag/r/train/map-2"),
        (-1, 0, "exp/dag/r/train/iter-0"),
        (-1, 1, "exp/dag/r/train/iter-1"),
        (2, 1, "exp/dag/r/train/iter-1/map-2"),
    ],
)  # fmt: skip
def test_each_iteration_starts_in_a_checkpoint_directory_of_its_own(map_index, iteration, expected):
    parsed = ckpt.parse({"claim": "ckpt", "path": "exp"})
    assert ckpt.sub_path(parsed, "dag", "r", "train", map_index, iteration=iteration) == expected


def test_the_rendered_checkpoint_mount_is_the_iterations():
    o = op(checkpoint={"claim": "ckpt", "path": "exp"})
    mounts = {}
    for i in (None, 0, 1):
        job = o.render_job({"ti": FakeTI(run_id="r"), **({"loop": loop(i)} if i is not None else {})})
        container = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
        mounts[i] = next(m["subPath"] for m in container["volumeMounts"] if m["name"] == ckpt.VOLUME_NAME)
    assert mounts == {None: "exp/dag/r/train", 0: "exp/dag/r/train/iter-0", 1: "exp/dag/r/train/iter-1"}


# -- the operator: a new job per iteration, never the last iteration's ---------------------------
def _op(cluster: Cluster) -> GenericJobOperator:
    o = op(GenericJobOperator, image="img:1", retries=1, wait_for_completion=False)
    o._hook = cluster
    o._cached_logger = logging.getLogger("t9k-test")
    return o


def _run(cluster: Cluster, store: Store, iteration: int | None, try_number: int = 1, max_tries: int = 1) -> dict:
    context = {"ti": _ti(try_number=try_number, max_tries=max_tries), "task_state_store": store}
    if iteration is not None:
        context["loop"] = loop(iteration)
    return _op(cluster).execute(context)


def test_each_iteration_submits_its_own_job_with_a_store_per_iteration():
    """Airflow 3.4 keeps a task state store per iteration: each iteration finds no record and
    submits under its own name, not ``<name>-t1`` beside the last iteration's job."""
    cluster = Cluster()
    ran = [_run(cluster, Store(), i) for i in (0, 1)]
    assert [r["name"] for r in ran] == [job_name("dag", "manual__1", "train", -1, iteration=i) for i in (0, 1)]
    assert len({r["uid"] for r in ran}) == 2
    assert [c[0] for c in cluster.calls if c[0] == "create"] == ["create", "create"]


def test_an_iteration_never_takes_the_last_iterations_job_from_a_shared_store(caplog):
    """A ``[state_store] backend`` that keys by map index alone shows iteration 1 the record
    iteration 0 left (its job still runs: without the iteration check, iteration 1 would reattach)."""
    cluster, store = Cluster(), Store()
    first = _run(cluster, store, 0)
    assert store[STATE_KEY]["iteration"] == 0
    assert store[SUBMITTING_KEY]["iteration"] == 0
    with caplog.at_level(logging.INFO, logger="t9k-test"):
        second = _run(cluster, store, 1)
    assert second["uid"] != first["uid"]
    assert second["name"] == job_name("dag", "manual__1", "train", -1, iteration=1)
    assert cluster.jobs[first["name"]]["status"]["phase"] == "Running"  # left alone: iteration 0's job
    assert "of loop iteration 0, and this is iteration 1" in caplog.text
    assert store[STATE_KEY] == {**{k: second[k] for k in ("kind", "name", "namespace", "uid")}, "server": "https://k8s.test",
                                "nonce": store[SUBMITTING_KEY]["nonce"], "iteration": 1}  # fmt: skip


def test_a_retry_within_an_iteration_reattaches_to_that_iterations_job():
    cluster, store = Cluster(), Store()
    _run(cluster, store, 0)
    second = _run(cluster, store, 1)
    retry = _run(cluster, store, 1, try_number=2, max_tries=1)  # the same series: max_tries unchanged
    assert retry["uid"] == second["uid"]
    assert len([c for c in cluster.calls if c[0] == "create"]) == 2


def test_outside_a_loop_the_records_are_as_before():
    cluster, store = Cluster(), Store()
    first = _run(cluster, store, None)
    assert "iteration" not in store[STATE_KEY]
    assert "iteration" not in store[SUBMITTING_KEY]
    assert _run(cluster, store, None, try_number=2)["uid"] == first["uid"]  # a retry reattaches, as always


# -- a sensor following the task's jobs follows the newest iteration's -----------------------------
def _labelled(name: str, try_number: int, iteration: int | None, created: str) -> dict:
    labels = {"airflow-t9k.io/try-number": str(try_number), **({LOOP_ITERATION: str(iteration)} if iteration is not None else {})}
    annotations = {f"airflow-t9k.io/{k}": v for k, v in (("dag-id", "d"), ("run-id", "r"), ("task-id", "t"), ("map-index", "-1"))}
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations, "creationTimestamp": created}}


@pytest.mark.parametrize(
    ("jobs", "followed"),
    [
        ([("a", 2, None, "2026-01-01T00:00:00Z"), ("b", 1, None, "2026-01-02T00:00:00Z")], "a"),  # the newest try, as before
        ([("i0-t2", 2, 0, "2026-01-01T00:00:00Z"), ("i1", 1, 1, "2026-01-02T00:00:00Z")], "i1"),  # a later iteration's first try
        ([("i1", 1, 1, "2026-01-02T00:00:00Z"), ("i1-t2", 2, 1, "2026-01-03T00:00:00Z")], "i1-t2"),
    ],
)  # fmt: skip
def test_a_sensor_follows_the_newest_iterations_newest_try(jobs, followed):
    assert choose([_labelled(*j) for j in jobs], "selector")["metadata"]["name"] == followed


# -- Airflow 3.4's own loop, run by `airflow dags test`: no cluster, the job rendered only ----------
PROBE_DAG = '''
from datetime import datetime

from airflow.sdk import DAG, task_group

from airflow_t9k.operators.kinds import GenericJobOperator


class Rendered(GenericJobOperator):
    """Returns the job it would submit (name, labels, checkpoint mount) instead of submitting it."""

    def execute(self, context):
        job = self.render_job(context)
        mounts = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["volumeMounts"]
        return {"name": job["metadata"]["name"], "labels": job["metadata"]["labels"], "checkpoint": mounts[0]["subPath"]}


with DAG("t9k_probe_loop", start_date=datetime(2026, 1, 1), schedule=None, catchup=False):

    @task_group
    def retrain():
        Rendered(task_id="train", image="busybox", namespace="ml", checkpoint={"claim": "ckpt", "path": "exp"})

    retrain.loop(max_iterations=2)
'''


def test_airflows_own_loop_gives_each_iteration_its_own_job(tmp_path):
    """What the unit tables above assume of Airflow 3.4: a classic operator in a loop's body finds
    its iteration in the context it renders and executes with (each iteration a task instance
    with map index -1), so each iteration renders a job of its own name and checkpoint directory."""
    pytest.importorskip("airflow.sdk.definitions.loop", reason="Airflow 3.3 has no Task Loops")
    import os
    import sqlite3
    import subprocess

    from tests.support.airflow import AIRFLOW, NO_MIGRATION_CHECK, ROOT, migrated_database

    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "t9k_probe_loop.py").write_text(PROBE_DAG)
    db = tmp_path / "airflow.db"
    migrated_database(db)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__DAGS_FOLDER=str(tmp_path / "dags"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}",
               PYTHONPATH=str(ROOT), **NO_MIGRATION_CHECK)  # fmt: skip
    out = subprocess.run([AIRFLOW, "dags", "test", "t9k_probe_loop"], env=env, capture_output=True, text=True, timeout=600,
                         check=False)  # fmt: skip
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select run_id from dag_run where dag_id = 't9k_probe_loop'").fetchone()
        rows = conn.execute("select ti.region_index, x.value from task_instance ti join xcom_v2 x on x.task_instance_id = ti.id "
                            "where ti.task_id = 'retrain.train' and x.key = 'return_value'").fetchall()  # fmt: skip
    got = {index: json.loads(value) for index, value in rows}
    assert sorted(got) == [0, 1], out.stdout[-3000:] + out.stderr[-3000:]
    for i in (0, 1):
        assert got[i]["name"] == job_name("t9k_probe_loop", run_id, "retrain.train", -1, iteration=i)
        assert got[i]["labels"][LOOP_ITERATION] == str(i)
        assert got[i]["labels"]["airflow-t9k.io/map-index"] == "none"  # a loop's task instance is not mapped
        assert got[i]["checkpoint"].endswith(f"/retrain.train/iter-{i}")
