"""The trigger's ends under a real Airflow (scheduler, triggerer, workers) and the local cluster.

- a triggerer whose identity may not list the jobs ends the deferred task at once, saying so;
- a job whose replicas cannot be scheduled fails after ``startup_timeout`` with the scheduler's
  reason, and is deleted;
- a deferred sensor ends when the job reaches a non-terminal target phase (``Running``), with
  the namespace from the connection and its fields templated.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.support.airflow import AirflowStack
from tests.support.cluster import wait_until
from tests.support.controller import ControllerProcess

DAGS = Path(__file__).resolve().parent / "e2e_trigger_dags"


def _limited_kubeconfig(api_client, cluster, ns: str, path: Path) -> None:
    """A real ServiceAccount token that may create, get, patch and delete genericjobs, not list them."""
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    name = "no-list"
    core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": name}, "rules": [
        {"apiGroups": ["batch.tensorstack.dev"], "resources": ["genericjobs"],
         "verbs": ["get", "create", "patch", "delete"]}]})  # fmt: skip
    rbac.create_namespaced_role_binding(ns, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]})  # fmt: skip
    token = core.create_namespaced_service_account_token(name, ns, {"spec": {"expirationSeconds": 3600}}).status.token
    base = yaml.safe_load(cluster.kubeconfig.read_text())
    base["users"] = [{"name": "sa", "user": {"token": token}}]
    base["contexts"][0]["context"]["user"] = "sa"
    path.write_text(yaml.safe_dump(base))


@pytest.fixture(scope="module")
def e2e(cluster, api_client, crds, tmp_path_factory) -> Iterator[tuple[AirflowStack, str, Path]]:
    core = client.CoreV1Api(api_client)
    ns = f"t9k-e2e-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_until(lambda: bool(core.list_namespaced_service_account(ns).items), what="default serviceaccount")
    home = tmp_path_factory.mktemp("airflow-e2e-trigger")
    limited = home / "limited-kubeconfig"
    _limited_kubeconfig(api_client, cluster, ns, limited)
    controller = ControllerProcess(cluster.kubeconfig, ns, home).start()
    stack = AirflowStack(home, cluster.kubeconfig, ns, dags=DAGS, env={"T9K_E2E_LIMITED_KUBECONFIG": str(limited)})
    try:
        stack.start()
        yield stack, ns, limited
    finally:
        stack.stop()
        controller.stop()
        core.delete_namespace(ns)


def _jobs(api_client, ns: str, run_id: str) -> list[dict]:
    items = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", ns, "genericjobs"
    )["items"]
    return [j for j in items if j["metadata"]["annotations"].get("airflow-t9k.io/run-id") == run_id]


def test_a_triggerer_that_may_not_list_ends_the_deferred_task_saying_so(e2e, api_client):
    stack, ns, limited = e2e
    run_id = stack.trigger("t9k_e2e_forbidden")
    states = stack.states_until("t9k_e2e_forbidden", run_id, {"success", "failed"}, timeout=120)
    assert states[-1] == "failed", states
    assert "deferred" in states, states
    log = stack.task_log("t9k_e2e_forbidden", run_id)
    expect = f"the triggerer's identity (kubeconfig {limited}) may not list genericjobs.batch.tensorstack.dev in namespace {ns}"
    assert expect in log, log[-3000:]
    assert len(_jobs(api_client, ns, run_id)) == 1  # the worker could submit: only the watch was refused


def test_a_job_that_cannot_be_scheduled_fails_after_startup_timeout(e2e, api_client):
    stack, ns, _ = e2e
    run_id = stack.trigger("t9k_e2e_startup")
    started = time.monotonic()
    states = stack.states_until("t9k_e2e_startup", run_id, {"success", "failed"}, timeout=120)
    assert states[-1] == "failed", states
    assert "deferred" in states, states
    assert time.monotonic() - started < 90  # not the 600 s timeout
    log = stack.task_log("t9k_e2e_startup", run_id)
    assert "did not start within startup_timeout=15s" in log, log[-3000:]
    assert "Insufficient nvidia.com/gpu" in log, log[-3000:]
    wait_until(lambda: _jobs(api_client, ns, run_id) == [], what="the unschedulable job deleted (on_kill_action=delete)")


def test_a_deferred_sensor_ends_when_the_job_runs(e2e, api_client):
    stack, ns, _ = e2e
    core = client.CoreV1Api(api_client)
    node = core.list_node().items[0].metadata.name
    run_id = stack.trigger("t9k_e2e_sensor")
    seen: list[str] = []

    def sensor_state() -> str | None:
        state = stack.tis("t9k_e2e_sensor", run_id).get("started", (None,))[0]
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        return state

    wait_until(lambda: sensor_state() == "deferred", timeout=120, interval=0.25, what="the sensor deferred")
    (job,) = _jobs(api_client, ns, run_id)
    assert job["status"]["phase"] == "Pending"
    core.patch_node(node, {"metadata": {"labels": {"t9k.test/e2e-sensor": "open"}}})  # the replica can run now
    try:
        wait_until(lambda: sensor_state() in ("success", "failed"), timeout=90, interval=0.25, what="the sensor ends")
    finally:
        core.patch_node(node, {"metadata": {"labels": {"t9k.test/e2e-sensor": None}}})
    assert seen[-1] == "success", seen
    (job,) = _jobs(api_client, ns, run_id)
    assert job["status"]["phase"] == "Running"  # it ended at Running, not at the job's end 120 s later
