"""The sensor follows a task across its retries, and a job deleted after it was seen ends the wait
(issue 28, point 5), against the real API server and controller, deferred and poking.

A task that retried has a job per try (``<name>``, ``<name>-t2``), carrying the same task labels:
given the task (``task=(dag_id, task_id, run_id)``) or a selector matching those jobs, the sensor
follows the newest try's job, also one a retry submits while it waits, instead of failing on
"matches 2 jobs" (or waiting on a job the task gave up).
"""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, TaskDeferred

from tests.integration.test_operator_trigger import conn, first_event, make_op  # noqa: F401
from tests.support.cluster import wait_until
from tests.support.task import Store, context

RUN = "manual__follow"
FAIL = {"sim.t9k.test/duration": "1s", "sim.t9k.test/fail-pods": "-worker-0$", "sim.t9k.test/exit-code": "3"}


def _sensor(**kw):
    from airflow_t9k.sensors.job import T9kJobSensor

    with DAG("sensing", start_date=datetime(2026, 1, 1), schedule=None):
        return T9kJobSensor(task_id="wait", kind="GenericJob", timeout=120, poke_interval=1, **kw)


def _deferred(sensor):
    sensor.deferrable = True
    with pytest.raises(TaskDeferred) as exc:
        sensor.execute({"run_id": RUN})
    return exc.value.trigger


def _failed_first_try(jobs) -> Store:
    """Try 1 of dag.train in RUN ran a job that failed; the store the retry sees."""
    store = Store()
    with pytest.raises(AirflowException, match="failed replicas"):
        make_op(sim=FAIL, deferrable=False).execute(context(store, run_id=RUN))
    return store


@pytest.mark.asyncio
@pytest.mark.parametrize("given", ["task", "selector"])
async def test_the_deferred_sensor_follows_the_newest_try_of_a_task(conn, jobs, controller, given):
    store = _failed_first_try(jobs)
    first = store["t9k_job"]["name"]
    # The retry's job, submitted before the sensor starts: two jobs carry the task's labels.
    make_op(sim={"sim.t9k.test/duration": "4s"}, deferrable=False, wait_for_completion=False).execute(
        context(store, run_id=RUN, try_number=2)
    )
    wanted = {"task": ("dag", "train")} if given == "task" else {"label_selector": "airflow-t9k.io/task-id=train"}
    trigger = _deferred(_sensor(namespace=jobs.ns, **wanted))
    event = (await first_event(trigger, timeout=60)).payload
    assert (event["status"], event["phase"], event["name"]) == ("success", "Succeeded", f"{first}-t2"), event


@pytest.mark.asyncio
async def test_the_deferred_sensor_follows_a_retrys_job_that_appears_while_it_waits(conn, jobs, controller):
    ident = make_op(deferrable=False, wait_for_completion=False).execute(context(run_id=RUN))  # runs until deleted
    trigger = _deferred(_sensor(namespace=jobs.ns, task=("dag", "train", RUN)))
    task = asyncio.create_task(first_event(trigger, timeout=60))
    await asyncio.sleep(3)
    assert not task.done()
    assert trigger.name == ident["name"]
    # A retry's job of the same task (as the operator makes it: the task's labels, try 2).
    retry = copy.deepcopy(jobs.get("GenericJob", ident["name"]))
    retry = {"apiVersion": retry["apiVersion"], "kind": "GenericJob", "spec": retry["spec"],
             "metadata": {"name": f"{ident['name']}-t2", "annotations": retry["metadata"]["annotations"],
                          "labels": {**retry["metadata"]["labels"], "airflow-t9k.io/try-number": "2"}}}  # fmt: skip
    for spec in retry["spec"]["replicaSpecs"]:
        spec["template"].setdefault("metadata", {}).setdefault("annotations", {})["sim.t9k.test/duration"] = "3s"
    jobs.create(retry)
    event = (await task).payload
    assert (event["status"], event["name"]) == ("success", f"{ident['name']}-t2"), event


@pytest.mark.asyncio
async def test_a_job_deleted_after_the_deferred_sensor_saw_it_ends_the_wait(conn, jobs, controller):
    ident = make_op(deferrable=False, wait_for_completion=False).execute(context(run_id=RUN))  # runs until deleted
    trigger = _deferred(_sensor(namespace=jobs.ns, name=ident["name"]))
    task = asyncio.create_task(first_event(trigger, timeout=30))
    await asyncio.sleep(3)
    assert not task.done()
    jobs.delete("GenericJob", ident["name"])
    event = (await task).payload  # not the sensor's timeout: at once
    assert (event["status"], "was deleted after it was seen" in event["message"]) == ("error", True), event


def test_a_job_deleted_after_the_poking_sensor_saw_it_fails_the_sensor(conn, jobs, controller):
    ident = make_op(deferrable=False, wait_for_completion=False).execute(context(run_id=RUN))
    sensor = _sensor(namespace=jobs.ns, name=ident["name"], deferrable=False)
    assert sensor.poke({"run_id": RUN}) is False  # running: seen, not done
    jobs.delete("GenericJob", ident["name"])
    items = lambda: jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns, "genericjobs")["items"]  # noqa: E731
    wait_until(lambda: not items(), what="the job gone")
    with pytest.raises(AirflowException, match="was deleted after it was seen"):
        sensor.poke({"run_id": RUN})


def test_the_poking_sensor_follows_the_newest_try_of_a_task(conn, jobs, controller):
    store = _failed_first_try(jobs)
    make_op(sim={"sim.t9k.test/duration": "2s"}, deferrable=False).execute(context(store, run_id=RUN, try_number=2))
    sensor = _sensor(namespace=jobs.ns, task=("dag", "train"), deferrable=False)
    assert sensor.poke({"run_id": RUN}) is True  # the retry's job succeeded; try 1's failed one is not followed
