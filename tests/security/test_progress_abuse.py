"""Attacks through what a replica prints (T9K_PROGRESS lines, docs/progress.md) and through how
many jobs a tenant runs (issue 29, 8): a line sequence whose ETA is infinite must not stall the
job's reconcile, and one namespace's many jobs must not take every followed log from the others.

The second counts log streams and the ones refused across a controller's whole scope, timing
what a neighbour's load would slow: it runs alone (serial). The first holds its replica running
until every line has been read, so no neighbour's load can end it early: it runs beside others."""

from __future__ import annotations

import time
import uuid

import pytest
from kubernetes import client

from tests.builders import generic
from tests.integration.test_progress import append_log
from tests.support.cluster import wait_until
from tests.support.jobs import Jobs
from tests.support.kubelet import release_pods

GJ = "GenericJob"


def _running(name: str) -> dict:
    """A one-replica job whose pod kwok holds Running until the test releases it (or ends)."""
    return generic(name, ("worker", 1))


def test_a_line_sequence_with_an_infinite_eta_does_not_stall_the_job(cluster, core, jobs, controller_factory):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    controller = controller_factory("--progress-interval", "1")
    jobs.create(_running("eta"))
    jobs.wait_phase(GJ, "eta", "Running", timeout=30)
    wait_until(lambda: controller.metrics().get("progress_stream_open", 0) >= 1, timeout=20, what="the log followed")
    time.sleep(0.5)
    # A rate of 1e-300 epochs a second toward 1e308 epochs: the ETA is infinite.
    for epoch in ("0", "1e-300", "2e-300", "3e-300"):
        append_log(cluster, jobs.ns, f'T9K_PROGRESS {{"epoch": {epoch}, "total_epochs": 1e308}}')
        time.sleep(2.2)
    wait_until(lambda: (jobs.get(GJ, "eta")["status"].get("progress") or {}).get("epoch") == 3e-300, timeout=30,
               what="the last line in the status")  # fmt: skip
    release_pods(core, jobs.ns, ["eta"])
    done = jobs.wait_phase(GJ, "eta", "Succeeded", "Failed", timeout=40)  # the pod ends; the pass that sees it must run
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert done["status"]["progress"]["epoch"] == 3e-300
    assert "eta" not in done["status"]["progress"]
    assert not any(c["type"] == "ReconcileError" and c["status"] == "True" for c in done["status"]["conditions"])
    assert controller.metrics().get("reconcile_error", 0) == 0


@pytest.mark.serial
def test_one_namespaces_many_jobs_do_not_take_every_followed_log(api_client, core, cluster, jobs, namespace, controller_factory):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    other = f"t9k-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other, labels={"airflow-t9k/test": "true"})))
    try:
        wait_until(lambda: core.list_namespaced_service_account(other).items, timeout=30, what="default SA")
        cluster.own_pod_log(other)
        quiet = Jobs(api_client, other)
        controller = controller_factory("-n", other, "--progress-streams", "3", "--progress-interval", "1")
        for n in range(5):  # the flood: more running jobs than there are streams
            jobs.create(_running(f"flood-{n}"))
        wait_until(lambda: controller.metrics().get("progress_stream_refused", 0) >= 2, timeout=40,
                   what="the flood holding every stream")  # fmt: skip
        quiet.create(_running("quiet"))
        quiet.wait_phase(GJ, "quiet", "Running", timeout=30)
        wait_until(lambda: controller.metrics().get("progress_stream_yielded", 0) >= 1, timeout=20,
                   what="a stream handed to the quiet namespace")  # fmt: skip

        def reported() -> bool:
            for ns in (namespace, other):  # every followed pod prints it, the flood's too
                append_log(cluster, ns, 'T9K_PROGRESS {"step": 7, "total_steps": 10}')
            return ((quiet.get(GJ, "quiet").get("status") or {}).get("progress") or {}).get("step") == 7

        wait_until(reported, timeout=20, interval=1.5, what="the quiet namespace's job's progress")
        flooded = [n for n in range(5) if (jobs.get(GJ, f"flood-{n}").get("status") or {}).get("progress")]
        assert 1 <= len(flooded) <= 2, flooded  # the flood kept what is left of the cap, no more
    finally:
        core.delete_namespace(other, propagation_policy="Background")
