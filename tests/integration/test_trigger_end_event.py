"""The job's ending Event reaches the task log although it is written after the status.

The controller records a job's end (its status) before it sends the Event that says so, and on
a busy cluster that Event came more than the half second the trigger used to wait: an example
DAG's log lacked "[event] Normal Succeeded" in a CI run. Here the test plays the controller, in a
namespace no controller manages: it writes the status, and the Event two seconds later.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kubernetes import client

from tests.integration.test_operator_trigger import conn, make_op  # noqa: F401
from tests.support.task import context

GROUP = ("batch.tensorstack.dev", "v1beta1")


def _end(api_client, ns: str, name: str) -> None:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object_status(*GROUP, ns, "genericjobs", name, {
        "status": {"phase": "Succeeded", "conditions": [
            {"type": "Completed", "status": "True", "reason": "Done", "message": "all done", "lastTransitionTime": now}]},
    })  # fmt: skip


def _ending_event(api_client, ns: str, job: dict) -> None:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    client.CoreV1Api(api_client).create_namespaced_event(ns, {
        "metadata": {"name": f"{job['metadata']['name']}.{uuid.uuid4().hex[:8]}"},
        "involvedObject": {"kind": "GenericJob", "name": job["metadata"]["name"], "namespace": ns,
                           "uid": job["metadata"]["uid"], "apiVersion": "batch.tensorstack.dev/v1beta1"},
        "reason": "Succeeded", "message": "the job ended late in the log", "type": "Normal", "count": 1,
        "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "t9k-controller"},
    })  # fmt: skip


def _deferred(ns_jobs) -> tuple:
    with pytest.raises(TaskDeferred) as exc:
        make_op(deferrable=True, log_events=True).execute(context())
    trigger = exc.value.trigger
    return trigger, ns_jobs.get("GenericJob", trigger.name)


@pytest.mark.asyncio
async def test_the_ending_event_written_after_the_status_is_in_the_task_log(conn, jobs, api_client, capsys):
    trigger, job = _deferred(jobs)
    waiting = asyncio.create_task(trigger.run().__anext__())
    await asyncio.sleep(2)  # the trigger's watch has listed the job by now (it would not matter if not)
    await asyncio.to_thread(_end, api_client, jobs.ns, trigger.name)
    await asyncio.sleep(2)
    assert not waiting.done(), "the trigger ended before the job's ending Event was written"
    await asyncio.to_thread(_ending_event, api_client, jobs.ns, job)
    payload = (await asyncio.wait_for(waiting, 30)).payload
    assert (payload["status"], payload["phase"]) == ("success", "Succeeded"), payload
    out = capsys.readouterr().out
    assert f"[event] Normal Succeeded GenericJob/{trigger.name}: the job ended late in the log" in out, out[-3000:]


@pytest.mark.asyncio
async def test_a_job_whose_ending_event_never_comes_still_ends_the_wait(conn, jobs, api_client, capsys):
    trigger, _ = _deferred(jobs)
    waiting = asyncio.create_task(trigger.run().__anext__())
    await asyncio.sleep(1)
    await asyncio.to_thread(_end, api_client, jobs.ns, trigger.name)
    payload = (await asyncio.wait_for(waiting, 30)).payload
    assert (payload["status"], payload["phase"]) == ("success", "Succeeded"), payload
    assert "[event] Normal Succeeded" not in capsys.readouterr().out
