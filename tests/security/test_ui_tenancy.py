"""Attacks on the T9k UI with a real Airflow (SimpleAuthManager users in teams), the bundled
controller and the local cluster. ``alice`` reads team A's DAGs, ``carol`` edits them, ``bob``
reads team B's (tests/integration/test_ui.py). The co-tenant who forges jobs does so with a real
ServiceAccount token bound to the shipped namespace Role (deploy/rbac-airflow-namespace.yaml):
exactly what a DAG author's worker may do."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import TYPE_CHECKING

import pytest
from kubernetes import client, config

from tests.integration.test_airflow_rbac import _apply_rbac
from tests.integration.test_ui import ui  # noqa: F401 - the module-scoped Airflow stack
from tests.support.cluster import wait_until

if TYPE_CHECKING:
    from tests.integration.test_ui import Ui


@pytest.fixture(scope="module")
def tenant(ui: Ui, cluster, api_client, tmp_path_factory):
    """A co-tenant's worker identity in the UI's namespace (token of a ServiceAccount bound to
    the shipped namespace-scoped Role)."""
    kubeconfigs, _ = _apply_rbac(api_client, cluster, ui.ns, "rbac-airflow-namespace.yaml", tmp_path_factory.mktemp("rbac"))
    return client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfigs["worker"])))


def _forge(tenant, ui: Ui, dag_id: str, task_id: str = "train") -> dict:
    """A job whose labels and annotations claim ``dag_id``'s task: newer than the real one."""
    real = ui.job(dag_id, ui.runs[dag_id])
    meta = {
        "name": f"forged-{uuid.uuid4().hex[:6]}",
        "labels": dict(real["metadata"]["labels"]),
        "annotations": {k: v for k, v in real["metadata"]["annotations"].items() if k.startswith("airflow-t9k.io/")},
    }
    meta["annotations"]["airflow-t9k.io/task-id"] = task_id
    body = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": meta,
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}]}}}]}}  # fmt: skip
    return tenant.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ui.ns, "genericjobs", body)


def test_a_forged_job_is_never_shown_or_acted_on(ui: Ui, tenant):
    dag = "t9k_ui_pause"
    real = ui.job(dag, ui.runs[dag])
    forged = _forge(tenant, ui, dag)
    status, body = ui.api.call("GET", "/t9k/api/jobs", "carol")
    assert status == 200, body
    names = {r["name"] for r in body["jobs"] if r["namespace"] == ui.ns}
    assert real["metadata"]["name"] in names
    assert forged["metadata"]["name"] not in names
    status, body = ui.api.call("GET", ui.task_path(dag), "carol")
    assert status == 200, body
    assert body["job"]["uid"] == real["metadata"]["uid"], body
    # carol's Delete acts on the job her task recorded, never on the newer forged one.
    status, body = ui.api.call("POST", ui.task_path(dag, "/pause"), "carol", body={})
    assert status == 200, body
    assert body["name"] == real["metadata"]["name"], body
    forged_now = ui.objects.get_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ui.ns, "genericjobs",
                                                         forged["metadata"]["name"])  # fmt: skip
    assert not ((forged_now["spec"].get("runMode") or {}).get("pause") or {}).get("enabled")
    ui.api.call("POST", ui.task_path(dag, "/resume"), "carol", body={})


def test_a_task_airflow_does_not_know_is_404_for_anyone(ui: Ui, tenant):
    """With multi_team, a DAG id Airflow does not know carries no team: the access check alone
    let anyone open a forged job under it."""
    status, body = ui.api.call("GET", "/t9k/api/dags/no_such_dag/runs/r/tasks/train/job", "bob")
    assert status == 404, body
    status, body = ui.api.call("POST", "/t9k/api/dags/no_such_dag/runs/r/tasks/train/job/delete", "bob", body={})
    assert status in (403, 404), body


def _raw_post(ui: Ui, path: str, user: str, headers: dict[str, str], data: bytes) -> int:
    """A POST as a browser would send it with the user's session cookie."""
    req = urllib.request.Request(ui.api.base + path, method="POST", data=data,
                                 headers={"Cookie": f"_token={ui.api.token(user)}", **headers})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _phase(ui: Ui, name: str) -> str | None:
    """The phase of the job named ``name`` (ui.phase matches by annotations, which a forged job shares)."""
    job = ui.objects.get_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ui.ns, "genericjobs", name)
    return (job.get("status") or {}).get("phase")


def test_a_cross_site_form_post_is_refused_and_the_pages_own_post_is_not(ui: Ui):
    dag = "t9k_ui_pause"
    path = ui.task_path(dag, "/pause")
    status, body = ui.api.call("GET", ui.task_path(dag), "carol")
    assert status == 200, body
    name = body["job"]["name"]  # the job the task recorded
    wait_until(lambda: _phase(ui, name) == "Running", timeout=30, what="running (resumed by an earlier test)")
    form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example.com",
            "Sec-Fetch-Site": "cross-site"}  # fmt: skip
    assert _raw_post(ui, path, "carol", form, b"x=1") == 403
    assert _raw_post(ui, path, "carol", {"Content-Type": "text/plain"}, b"{}") == 403
    assert _phase(ui, name) == "Running"
    same = {"Content-Type": "application/json", "Origin": ui.api.base, "Sec-Fetch-Site": "same-origin"}
    assert _raw_post(ui, path, "carol", same, b"{}") == 200  # the cookie itself is accepted
    wait_until(lambda: _phase(ui, name) == "Paused", timeout=30, what="paused by the page's own POST")
    status, body = ui.api.call("GET", "/api/v2/eventLogs?event=t9k.paused", "admin")
    assert status == 200, body
    assert any(e["owner"] == "carol" and e["dag_id"] == dag for e in body["event_logs"]), body
    ui.api.call("POST", ui.task_path(dag, "/resume"), "carol", body={})


def test_events_and_pods_of_another_object_with_a_similar_name_do_not_leak(ui: Ui, api_client):
    dag = "t9k_ui_a"
    real = ui.job(dag, ui.runs[dag])
    name = real["metadata"]["name"]
    core = client.CoreV1Api(api_client)
    core.create_namespaced_event(ui.ns, {
        "metadata": {"generateName": "leak-"}, "reason": "LeakedFromAnotherDag", "message": "secret-ish", "type": "Normal",
        "involvedObject": {"kind": "GenericJob", "name": name, "namespace": ui.ns, "uid": str(uuid.uuid4())},
    })  # fmt: skip
    core.create_namespaced_pod(
        ui.ns,
        {
            "metadata": {"name": f"{name}-worker-99", "labels": {"batch.tensorstack.dev/job-name": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    status, body = ui.api.call("GET", ui.task_path(dag), "alice")
    assert status == 200, body
    assert "LeakedFromAnotherDag" not in json.dumps(body["job"]["events"])
    assert f"{name}-worker-99" not in {r["pod"] for r in body["job"]["replica_table"]}
    status, _ = ui.api.call("GET", ui.task_path(dag, f"/log?pod={name}-worker-99"), "alice")
    assert status == 404
