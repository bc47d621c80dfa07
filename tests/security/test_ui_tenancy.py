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


def _recording_run(ui: Ui, record: dict, run_id: str) -> str:
    """A run of team A's t9k_ui_xcom, whose task's own code pushes ``record`` as its t9k_job."""
    dag = "t9k_ui_xcom"
    wait_until(lambda: ui.stack._dag_known(dag), timeout=60, interval=1, what=f"{dag} parsed")
    for method, path, body in [("PATCH", f"/api/v2/dags/{dag}", {"is_paused": False}),
                               ("POST", f"/api/v2/dags/{dag}/dagRuns", {"dag_run_id": run_id, "logical_date": None,
                                                                         "conf": {"record": record}})]:  # fmt: skip
        status, answer = ui.api.call(method, path, "admin", body=body)
        assert status in (200, 201), (path, status, answer)
    ui.stack.states_until(dag, run_id, {"success", "failed"}, timeout=90)
    assert ui.stack.ti(dag, run_id)[0] == "success"
    return f"/t9k/api/dags/{dag}/runs/{run_id}/tasks/train/job"


def _victim(api_client, ns: str, name: str, annotations: dict) -> dict:
    objects = client.CustomObjectsApi(api_client)
    body = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}]}}}]}}  # fmt: skip
    job = objects.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", body)
    job["kind"] = "GenericJob"
    return job


def _identity(job: dict) -> dict:
    meta = job["metadata"]
    return {"kind": job["kind"], "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}


def _refused_everywhere(ui: Ui, path: str, victim: dict) -> None:
    """The tab shows nothing of ``victim`` and every action on it is refused; it is untouched."""
    name = victim["metadata"]["name"]
    status, body = ui.api.call("GET", path, "carol")
    assert status == 200, body
    assert body["job"] is None, body
    # Earlier attempts (the state store's t9k_jobs, also written by the task): the record as
    # written, never the job's phase, root cause or what was kept of it.
    assert body["attempts"], body
    assert all((a["status"], a["phase"], a["kept"]) == ("gone", None, None) for a in body["attempts"]), body["attempts"]
    status, body = ui.api.call("GET", path + f"/log?pod={name}-worker-0", "carol")
    assert status == 404, body
    for verb, body_ in (("pause", {}), ("resume", {}), ("scale", {"replicas": 2}), ("delete", {})):
        status, answer = ui.api.call("POST", f"{path}/{verb}", "carol", body=body_)
        assert status == 404, (verb, status, answer)
    meta = victim["metadata"]
    now = ui.objects.get_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", meta["namespace"], "genericjobs", name)
    assert now["metadata"]["uid"] == meta["uid"]
    assert not now["metadata"].get("deletionTimestamp")
    assert not ((now["spec"].get("runMode") or {}).get("pause") or {}).get("enabled")


def test_a_task_recording_another_namespaces_job_gets_nothing_of_it(ui: Ui, api_client, core, namespace):
    """Issue 29, 1: a team A task's own code pushes XCom t9k_job (and the state store's t9k_jobs)
    naming a job of another namespace, uid and all (a uid is in every asset event). The tab
    shows nothing of it, and pause, resume, scale and delete on it are refused: its annotations
    name another task. ``namespace`` is that other namespace (the controller does not run there)."""
    victim = _victim(api_client, namespace, "victim", {f"airflow-t9k.io/{k}": v for k, v in (
        ("dag-id", "t9k_ui_b"), ("run-id", "their-run"), ("task-id", "train"), ("map-index", "-1"))})  # fmt: skip
    path = _recording_run(ui, _identity(victim), f"xcom-{uuid.uuid4().hex[:6]}")
    _refused_everywhere(ui, path, victim)


def test_a_task_recording_another_teams_job_in_its_own_namespace_gets_nothing_of_it(ui: Ui):
    """The same with team B's real job, submitted by team B's task in the UI's namespace."""
    victim = ui.job("t9k_ui_b", ui.runs["t9k_ui_b"])
    path = _recording_run(ui, _identity(victim), f"xcom-{uuid.uuid4().hex[:6]}")
    _refused_everywhere(ui, path, victim)


def test_team_namespaces_keep_a_team_to_its_namespaces(ui: Ui, api_client, namespace):
    """A job outside team A's namespaces ([t9k] team_namespaces) is not shown for team A's task even
    when its annotations name that very task: whoever could create it there (a worker with the
    cluster-wide RBAC) does not get the UI's identity to act in that namespace."""
    run_id = f"xcom-{uuid.uuid4().hex[:6]}"
    annotations = {f"airflow-t9k.io/{k}": v for k, v in (("dag-id", "t9k_ui_xcom"), ("run-id", run_id), ("task-id", "train"),
                                                         ("map-index", "-1"))}  # fmt: skip
    elsewhere = _victim(api_client, namespace, "elsewhere", annotations)
    path = _recording_run(ui, _identity(elsewhere), run_id)
    _refused_everywhere(ui, path, elsewhere)
