"""Startup defaults that give up (issue 21, point 7), against the real API server and controller.

kwok runs no image, so the kubelet's part is played by ``set_pod_waiting`` on pods no kwok node
runs (a node selector nothing matches): the controller reads them as it would any pod.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred

from airflow_t9k.triggers.job import T9kJobTrigger
from tests.integration.test_operator_trigger import _gone, conn, first_event, make_op  # noqa: F401 - fixtures
from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_waiting
from tests.support.task import Store, context

NOWHERE = {"airflow-t9k.test/no-such-node": "x"}
PULL = 'Back-off pulling image "busybox:typo"'


def _pull_fails(jobs, name):
    wait_until(lambda: len(jobs.pods(name)) == 2, what="both replica pods created")
    set_pod_waiting(jobs.core, jobs.ns, f"{name}-worker-0", reason="ImagePullBackOff", message=PULL)


@pytest.mark.asyncio
async def test_an_image_error_fails_the_deferred_task_after_the_grace(conn, jobs, controller):
    store = Store()
    with pytest.raises(TaskDeferred) as exc:
        make_op(deferrable=True, node_selector=NOWHERE, startup_error_grace=2).execute(context(store))
    trigger = exc.value.trigger
    _pull_fails(jobs, trigger.name)
    event = (await first_event(trigger, timeout=30)).payload
    assert event["status"] == "startup_error"
    assert "ImagePullBackOff" in event["message"]
    assert PULL in event["message"]
    with pytest.raises(AirflowException, match="cannot start") as failed:
        make_op(deferrable=True, node_selector=NOWHERE, startup_error_grace=2).execute_complete(context(store), event)
    assert "startup_error_grace" in str(failed.value)
    # A pull error may pass (a registry's rate limit): the try fails and is retried (issue 28, point 3).
    assert not isinstance(failed.value, AirflowFailException), failed.value
    assert event["waiting"] == {f"{trigger.name}-worker-0": "ImagePullBackOff"}
    wait_until(lambda: _gone(jobs, trigger.name), what="the job that cannot start deleted")


def test_an_image_error_fails_the_worker_side_wait_after_the_grace(conn, jobs, controller):
    store = Store()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            make_op(deferrable=False, node_selector=NOWHERE, startup_error_grace=2).execute(context(store))
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    wait_until(lambda: "t9k_job" in store, what="the job submitted")
    _pull_fails(jobs, store["t9k_job"]["name"])
    worker.join(60)
    assert not worker.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], AirflowException)
    assert "ImagePullBackOff" in str(outcome[0])
    assert PULL in str(outcome[0])
    assert not isinstance(outcome[0], AirflowFailException), outcome[0]  # retried (issue 28, point 3)
    wait_until(lambda: _gone(jobs, store["t9k_job"]["name"]), what="the job that cannot start deleted")


@pytest.mark.asyncio
async def test_startup_timeout_applies_again_after_a_pause_and_resume(conn, jobs, controller):
    ident = make_op(deferrable=False, wait_for_completion=False).execute(context())
    name = ident["name"]
    jobs.wait_phase("GenericJob", name, "Running")
    jobs.patch("GenericJob", name, {"spec": {"runMode": {"pause": {"enabled": True}}}})
    jobs.wait_phase("GenericJob", name, "Paused")
    # While paused the job is edited so that its replicas cannot be scheduled on resume.
    job = jobs.get("GenericJob", name)
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["nodeSelector"] = NOWHERE
    jobs.patch("GenericJob", name, {"spec": {"replicaSpecs": job["spec"]["replicaSpecs"]}})
    jobs.patch("GenericJob", name, {"spec": {"runMode": {"pause": {"enabled": False}}}})
    jobs.wait_phase("GenericJob", name, "Resuming")
    trigger = T9kJobTrigger(kind="GenericJob", name=name, namespace=jobs.ns, uid=ident["uid"], startup_timeout=3,
                            deadline=(datetime.now(timezone.utc) + timedelta(seconds=40)).isoformat(),
                            log_events=False, stream_logs=False)  # fmt: skip
    event = (await first_event(trigger, timeout=60)).payload
    assert event["status"] == "timeout", event["message"]
    assert "did not start within startup_timeout=3s" in event["message"], event["message"]
