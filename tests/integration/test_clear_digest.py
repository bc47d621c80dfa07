"""A Clear of a task whose job still runs takes that job only when the task renders the same job
now (issue 44, items 4 and 5): against the real API server and controller, with the operator driven
as in test_operator_rerun.py (a task instance and its state store; a Clear is the next try in a new
series: Airflow sets ``max_tries = try_number + retries``)."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import TaskDeferred

from airflow_t9k.operators.kinds import GenericJobOperator
from tests.integration.test_operator_trigger import _gone, conn  # noqa: F401 - fixture
from tests.support.cluster import wait_until
from tests.support.task import Store, context

NFS = {"volume": {"nfs": {"server": "nas.example", "path": "/export"}}, "path": "exp"}


def _op(image: str, **kw):
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return GenericJobOperator(task_id="train", image=image, replicas=2, retries=1, deferrable=True, checkpoint=NFS, **kw)


def _submit(op, store, try_number, max_tries):
    ctx = context(store, try_number=try_number, max_tries=max_tries)
    with pytest.raises(TaskDeferred) as exc:
        op.execute(ctx)
    return exc.value.trigger, ctx["ti"].xcom


def _images(jobs, name):
    return {c.image for pod in jobs.pods(name).values() for c in pod.spec.containers}


@pytest.mark.parametrize("action", ["delete", "keep"])
def test_a_clear_after_the_image_changed_ends_the_running_job_and_submits_the_new_one(conn, jobs, controller, action):
    store = Store()
    old, _ = _submit(_op("busybox:1.36", on_kill_action=action), store, 1, 1)  # try 1 of the first series
    jobs.wait_phase("GenericJob", old.name, "Running")
    # The DAG's image is fixed, and the task cleared while its job runs: try 2 starts a new series.
    new, xcom = _submit(_op("busybox:1.37", on_kill_action=action), store, 2, 2)
    assert new.uid != old.uid
    assert jobs.get("GenericJob", new.name)["metadata"]["annotations"]["airflow-t9k.io/spec-digest"].startswith("v1:")
    wait_until(lambda: _images(jobs, new.name) == {"busybox:1.37"}, what="the new job's pods with the new image")
    if action == "delete":
        wait_until(lambda: _gone(jobs, old.name) or jobs.get("GenericJob", old.name)["metadata"]["uid"] != old.uid,
                   what="the old job deleted")  # fmt: skip
    else:  # keep: it runs on beside the new one, under its own name
        assert new.name == f"{old.name}-t2"
        assert jobs.get("GenericJob", old.name)["status"]["phase"] == "Running"
    # A new series starts its checkpoints empty (checkpoint_scope="series", the default).
    assert xcom["checkpoint_location"]["sub_path"].endswith("/train/series-2")
    mounts = {m.sub_path for pod in jobs.pods(new.name).values() for c in pod.spec.containers for m in c.volume_mounts
              if m.mount_path == "/t9k/checkpoint"}  # fmt: skip
    assert mounts == {xcom["checkpoint_location"]["sub_path"]}


def test_a_clear_with_the_same_job_reattaches_and_reports_that_jobs_checkpoints(conn, jobs, controller):
    store = Store()
    old, first = _submit(_op("busybox:1.36", checkpoint_scope="try"), store, 1, 1)
    jobs.wait_phase("GenericJob", old.name, "Running")
    again, xcom = _submit(_op("busybox:1.36", checkpoint_scope="try"), store, 2, 2)
    assert again.uid == old.uid
    assert jobs.get("GenericJob", old.name)["status"]["phase"] == "Running"
    # The job of try 1 keeps its directory, and that is the location the Clear's try reports.
    assert xcom["checkpoint_location"] == first["checkpoint_location"]
    assert xcom["checkpoint_location"]["sub_path"].endswith("/train/try-1")
