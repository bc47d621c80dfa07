"""Kills that leave the job alone (issue 21, point 8): ``on_kill_action="keep"``, and a kill
that arrives after the trigger has reported the job's end. Against the real API server and
controller."""

from __future__ import annotations

import asyncio

import pytest
from airflow.sdk.exceptions import TaskDeferred

from tests.integration.test_operator_trigger import _trigger_for, conn, first_event, make_op  # noqa: F401 - fixtures
from tests.support.task import context


@pytest.mark.asyncio
async def test_a_deferred_kill_with_keep_leaves_the_job_running(conn, jobs, controller):
    trigger = _trigger_for(jobs, conn, on_kill_action="keep", log_events=False, stream_logs=False)
    task = asyncio.create_task(first_event(trigger))
    jobs.wait_phase("GenericJob", trigger.name, "Running")
    await trigger.on_kill()
    task.cancel()
    await asyncio.sleep(2)  # a delete or a pause would show by now
    job = jobs.get("GenericJob", trigger.name)
    assert job["metadata"]["uid"] == trigger.uid
    assert job["status"]["phase"] == "Running"


def test_a_worker_side_kill_with_keep_leaves_the_job_running(conn, jobs, controller):
    op = make_op(deferrable=False, wait_for_completion=False, on_kill_action="keep")
    ident = op.execute(context())
    jobs.wait_phase("GenericJob", ident["name"], "Running")
    op.on_kill()
    assert jobs.wait_phase("GenericJob", ident["name"], "Running")["metadata"]["uid"] == ident["uid"]


@pytest.mark.asyncio
async def test_a_kill_after_the_trigger_fired_does_not_delete_the_finished_job(conn, jobs, controller):
    with pytest.raises(TaskDeferred) as exc:
        make_op(sim={"sim.t9k.test/duration": "1s"}, deferrable=True, log_events=False, stream_logs=False).execute(context())
    trigger = exc.value.trigger
    assert (await first_event(trigger)).payload["status"] == "success"
    await trigger.on_kill()  # e.g. Mark success while the triggerer still held the trigger
    await asyncio.sleep(1)
    assert jobs.get("GenericJob", trigger.name)["metadata"]["uid"] == trigger.uid
