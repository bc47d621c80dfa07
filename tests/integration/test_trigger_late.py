"""A wait that ends after its deadline must not destroy a job that finished (issue 21, point 3).

A trigger can start long after its deadline (the triggerer was down, or busy); the shared
watch has then not delivered the job yet. Against the real API server and controller: the
trigger reads the job once before it says ``timeout``, and the task reads it again before it
deletes anything on a timeout.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from tests.integration.test_operator_trigger import _trigger_for, conn, first_event, make_op  # noqa: F401 - fixtures
from tests.support.task import Store, context

LONG_AGO = (datetime.now(timezone.utc) - timedelta(minutes=10)).isoformat()


@pytest.mark.asyncio
@pytest.mark.parametrize(("sim", "status", "phase"),
                         [({}, "success", "Succeeded"), ({"sim.t9k.test/fail-pods": ".*"}, "failed", "Failed")],
                         ids=["succeeded", "failed"])  # fmt: skip
async def test_a_trigger_started_past_its_deadline_reports_how_the_job_ended(conn, jobs, controller, sim, status, phase):
    trigger = _trigger_for(
        jobs, conn, sim={"sim.t9k.test/duration": "1s", **sim}, timeout=600, log_events=False, stream_logs=False
    )
    jobs.wait_phase("GenericJob", trigger.name, phase)
    trigger.policy = replace(trigger.policy, deadline=LONG_AGO)  # as if the triggerer had been down past it
    event = (await first_event(trigger)).payload
    assert (event["status"], event["phase"]) == (status, phase)


@pytest.mark.asyncio
async def test_a_trigger_started_past_its_deadline_still_times_out_a_running_job(conn, jobs, controller):
    trigger = _trigger_for(jobs, conn, timeout=600, log_events=False, stream_logs=False)
    jobs.wait_phase("GenericJob", trigger.name, "Running")
    trigger.policy = replace(trigger.policy, deadline=LONG_AGO)
    event = (await first_event(trigger, timeout=30)).payload
    assert (event["status"], event["phase"]) == ("timeout", "Running")


def test_the_task_rereads_a_timed_out_job_and_keeps_one_that_succeeded(conn, jobs, controller):
    store = Store()
    op = make_op(sim={"sim.t9k.test/duration": "1s"}, deferrable=False, wait_for_completion=False)
    ident = op.execute(context(store))
    jobs.wait_phase("GenericJob", ident["name"], "Succeeded")
    stale = {"status": "timeout", "kind": "GenericJob", "name": ident["name"], "namespace": jobs.ns, "uid": ident["uid"],
             "phase": "Running", "message": "timed out waiting", "state": {"phase": "Running"}, "logs": {}}  # fmt: skip
    out = make_op(sim={"sim.t9k.test/duration": "1s"}).execute_complete(context(store), stale)
    assert (out["phase"], out["uid"]) == ("Succeeded", ident["uid"])
    assert jobs.get("GenericJob", ident["name"])["metadata"]["uid"] == ident["uid"]  # not deleted
