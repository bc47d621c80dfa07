"""The deferrable sensor defers at once and its trigger waits for the job to appear (issue 21,
point 4), against the real API server and controller."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, TaskDeferred

from airflow_t9k.operators.job import job_name
from tests.integration.test_operator_trigger import conn, first_event, make_op  # noqa: F401 - fixtures
from tests.support.task import context


def _deferred_sensor(**kw):
    from airflow_t9k.sensors.job import T9kJobSensor

    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        sensor = T9kJobSensor(task_id="wait", kind="GenericJob", timeout=120, deferrable=True, **kw)
    with pytest.raises(TaskDeferred) as exc:
        sensor.execute({})
    return sensor, exc.value.trigger


@pytest.mark.asyncio
@pytest.mark.parametrize("by", ["name", "labels"])
async def test_the_deferred_sensor_waits_for_a_job_submitted_after_it(conn, jobs, controller, by):
    run_id = f"manual__later_{by}"
    wanted = (
        {"name": job_name("dag", run_id, "train", -1)} if by == "name" else {"label_selector": f"airflow-t9k.io/run-id={run_id}"}
    )
    sensor, trigger = _deferred_sensor(namespace=jobs.ns, **wanted)
    task = asyncio.create_task(first_event(trigger, timeout=90))
    await asyncio.sleep(3)
    assert not task.done()  # no job yet: waiting, not "deleted" or "not found"
    make_op(sim={"sim.t9k.test/duration": "2s"}, deferrable=False, wait_for_completion=False).execute(context(run_id=run_id))
    event = (await task).payload
    assert (event["status"], event["phase"]) == ("success", "Succeeded")
    sensor.execute_complete({}, event)  # in the targets: the sensor succeeds


def test_a_label_selector_matching_two_tasks_jobs_fails_the_deferrable_sensor_on_the_worker(conn, jobs, controller):
    for run_id in ("manual__a", "manual__b"):
        make_op(deferrable=False, wait_for_completion=False).execute(context(run_id=run_id))
    with pytest.raises(AirflowException, match="matches 2 jobs of 2 tasks"):  # its one read before deferring
        _deferred_sensor(namespace=jobs.ns, label_selector="airflow-t9k.io/dag-id=dag")


@pytest.mark.asyncio
async def test_two_tasks_jobs_appearing_after_the_deferral_end_the_sensor_with_an_error(conn, jobs, controller):
    _, trigger = _deferred_sensor(namespace=jobs.ns, label_selector="airflow-t9k.io/dag-id=dag")
    task = asyncio.create_task(first_event(trigger, timeout=30))
    for run_id in ("manual__a", "manual__b"):
        make_op(deferrable=False, wait_for_completion=False).execute(context(run_id=run_id))
    event = (await task).payload
    assert event["status"] == "error"
    assert "matches 2 jobs of 2 tasks" in event["message"]
