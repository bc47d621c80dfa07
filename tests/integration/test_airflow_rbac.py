"""Airflow's side works with exactly the RBAC deploy/rbac-airflow-*.yaml grants, and no more.

Each variant is applied under unique names, bound to two real ServiceAccounts (the worker's
and the triggerer's), and used through kubeconfigs holding their tokens: the operator submits,
waits, reads failed replicas' logs, pauses and deletes; the trigger watches the job and its
Events; the sensor lists. What is not granted is refused by the API server (403).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from kubernetes import client, config, utils
from kubernetes.client.exceptions import ApiException

from airflow_t9k.hooks.t9k import T9kHook
from airflow_t9k.operators.kinds import GenericJobOperator
from airflow_t9k.sensors.job import T9kJobSensor
from airflow_t9k.triggers.job import T9kJobTrigger
from tests.support.cluster import wait_until
from tests.support.rbac import delete_cluster_scoped
from tests.support.task import context as task_context

ROOT = Path(__file__).resolve().parents[2]
SIM = "sim.t9k.test"


def context(run_id: str) -> dict:
    return task_context(run_id=run_id)


def make_op(sim: dict | None = None, **kw) -> GenericJobOperator:
    with DAG("rbac", start_date=datetime(2026, 1, 1), schedule=None):
        return GenericJobOperator(task_id="train", image="busybox", replicas=2, pod_annotations=sim or {}, **kw)


def _apply_rbac(api_client, cluster, namespace: str, manifest: str, tmp_path: Path) -> tuple[dict[str, Path], list[dict]]:
    """The manifest under unique names, bound to a worker and a triggerer ServiceAccount in
    ``namespace``; a kubeconfig per ServiceAccount holding its real token."""
    suffix = uuid.uuid4().hex[:6]
    accounts = {"worker": f"airflow-worker-{suffix}", "triggerer": f"airflow-triggerer-{suffix}"}
    text = (ROOT / "deploy" / manifest).read_text()
    text = text.replace("airflow-t9k-tasks", f"airflow-t9k-tasks-{suffix}")
    text = text.replace("airflow-t9k-evidence", f"airflow-t9k-evidence-{suffix}")  # cluster-scoped: unique per test
    text = text.replace("namespace: ml-jobs\n", f"namespace: {namespace}\n").replace(
        "namespace: airflow\n", f"namespace: {namespace}\n"
    )
    for role, sa in accounts.items():
        text = text.replace(f"name: airflow-{role}\n", f"name: {sa}\n")
    docs = [d for d in yaml.safe_load_all(text) if d]
    core = client.CoreV1Api(api_client)
    kubeconfigs = {}
    for sa in accounts.values():
        core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    utils.create_from_yaml(api_client, yaml_objects=docs)
    for role, sa in accounts.items():
        token = core.create_namespaced_service_account_token(sa, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
        base = yaml.safe_load(cluster.kubeconfig.read_text())
        base["users"] = [{"name": "sa", "user": {"token": token}}]
        base["contexts"][0]["context"]["user"] = "sa"
        kubeconfigs[role] = tmp_path / f"kubeconfig-{role}-{suffix}"
        kubeconfigs[role].write_text(yaml.safe_dump(base))
    return kubeconfigs, docs


def _status(call) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


@pytest.fixture(params=["rbac-airflow-namespace.yaml", "rbac-airflow-cluster.yaml"])
def identities(request, monkeypatch, api_client, cluster, namespace, tmp_path):
    """Kubeconfigs of the worker and triggerer identities; the connections `kubernetes_default`
    (the worker's) and `t9k_triggerer`."""
    kubeconfigs, docs = _apply_rbac(api_client, cluster, namespace, request.param, tmp_path)
    extra = f'{{"kube_config_path": "{kubeconfigs["worker"]}", "namespace": "{namespace}"}}'
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", f'{{"conn_type": "kubernetes", "extra": {extra}}}')
    extra = f'{{"kube_config_path": "{kubeconfigs["triggerer"]}", "namespace": "{namespace}"}}'
    monkeypatch.setenv("AIRFLOW_CONN_T9K_TRIGGERER", f'{{"conn_type": "kubernetes", "extra": {extra}}}')
    yield SimpleNamespace(manifest=request.param, kubeconfigs=kubeconfigs)
    delete_cluster_scoped(api_client, docs)


def _gone(jobs, name: str) -> bool:
    return _status(lambda: jobs.get("GenericJob", name)) == 404


def test_operator_submits_waits_reads_logs_and_deletes_with_exactly_this_rbac(identities, jobs, controller, capsys):
    failing = {f"{SIM}/duration": "1s", f"{SIM}/fail-pods": "-worker-1$", f"{SIM}/exit-code": "3"}
    ctx = context("sync")
    with pytest.raises(AirflowException) as exc:
        make_op(sim=failing, deferrable=False, delete_on_finish="always").execute(ctx)
    name = ctx["task_state_store"]["t9k_job"]["name"]
    # The failed replica's log was read (pods/log) rather than "(log not available: ...)", and its
    # pod listed (pods list) to name it the root cause with how its container ended.
    text = str(exc.value)
    assert f"--- last lines of {name}-worker-1 ---\n" in text, text
    assert "log not available" not in text, text
    assert f"root cause: replica {name}-worker-1 failed first (at " in text, text
    assert "container main exit code 3" in text, text
    wait_until(lambda: _gone(jobs, name), what="job deleted with the worker's identity")

    # Deferred: the worker submits, the triggerer (its own identity) watches the job and its Events.
    ctx = context("deferred")
    op = make_op(sim={f"{SIM}/duration": "1s"}, deferrable=True, delete_on_finish="on_success")
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(ctx)
    # The triggerer resolves its own connection: the same trigger, on the triggerer's identity.
    kwargs = {k: v for k, v in deferred.value.trigger.serialize()[1].items() if k not in ("config_dict", "connection_extras")}
    trigger = T9kJobTrigger(**{**kwargs, "connection": {"kubernetes_conn_id": "t9k_triggerer"}})
    event = asyncio.run(asyncio.wait_for(trigger.run().__anext__(), 60)).payload
    assert (event["status"], event["phase"]) == ("success", "Succeeded"), event
    forwarded = [line for line in capsys.readouterr().out.splitlines() if "[event]" in line and event["name"] in line]
    assert any("Running" in line for line in forwarded), forwarded  # the job's Events reached the task log
    assert op.execute_complete(ctx, event)["phase"] == "Succeeded"
    wait_until(lambda: _gone(jobs, event["name"]), what="job deleted on success")

    # The hook lists a running job's pods and Events; kill with on_kill_action="pause" patches
    # the job; the sensor lists by label.
    paused = make_op(deferrable=False, wait_for_completion=False, on_kill_action="pause")
    ident = paused.execute(context("paused"))
    jobs.wait_phase("GenericJob", ident["name"], "Running")
    hook = T9kHook(kubernetes_conn_id="kubernetes_default")
    assert sorted(p["metadata"]["name"] for p in hook.list_replica_pods(ident["name"], jobs.ns)) == [
        f"{ident['name']}-worker-0", f"{ident['name']}-worker-1"]  # fmt: skip
    wait_until(lambda: "Running" in {e["reason"] for e in hook.list_events(ident["name"], jobs.ns)}, what="the job's Events")
    paused.on_kill()
    jobs.wait_phase("GenericJob", ident["name"], "Paused")
    with DAG("rbac", start_date=datetime(2026, 1, 1), schedule=None):
        sensor = T9kJobSensor(task_id="wait", kind="GenericJob", namespace=jobs.ns, label_selector="airflow-t9k.io/run-id=paused",
                              target_phases=("Paused",), poke_interval=1, timeout=30)  # fmt: skip
    assert sensor.poke({}) is True


def test_exactly_what_is_granted_is_allowed(identities, jobs, controller):
    ident = make_op(deferrable=False, wait_for_completion=False).execute(context("forbidden"))
    jobs.wait_phase("GenericJob", ident["name"], "Running")
    jobs.core.create_namespaced_secret(jobs.ns, {"metadata": {"name": "db-password"}, "stringData": {"password": "x"}})
    pod, ns = f"{ident['name']}-worker-0", jobs.ns

    def check(role, kubeconfig):  # a function, so the lambdas below close over this role's clients
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        custom = client.CustomObjectsApi(core.api_client)
        allowed = {
            "get a pod": lambda: core.read_namespaced_pod(pod, ns),
            "list pods": lambda: core.list_namespaced_pod(ns),
            "read a pod's log": lambda: core.read_namespaced_pod_log(pod, ns),
            "list Events": lambda: core.list_namespaced_event(ns),
            "watch Events": lambda: core.list_namespaced_event(ns, watch=True, timeout_seconds=1,
                                                               _preload_content=False).release_conn(),
            "watch jobs": lambda: custom.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs",
                                                                       watch=True, timeout_seconds=1,
                                                                       _preload_content=False).release_conn(),
            "list AscendJobs": lambda: custom.list_namespaced_custom_object("mindxdl.gitee.com", "v1", ns, "ascendjobs"),
        }  # fmt: skip
        refused = {
            "delete a pod": lambda: core.delete_namespaced_pod(pod, ns),
            "create a pod": lambda: core.create_namespaced_pod(ns, {"metadata": {"name": "x"},
                                                                    "spec": {"containers": [{"name": "x", "image": "x"}]}}),
            "patch a pod": lambda: core.patch_namespaced_pod(pod, ns, {"metadata": {"labels": {"x": "y"}}}),
            "read a Secret": lambda: core.read_namespaced_secret("db-password", ns),
            "list Secrets": lambda: core.list_namespaced_secret(ns),
            "create an Event": lambda: core.create_namespaced_event(ns, {"metadata": {"name": "x"}, "involvedObject": {},
                                                                         "reason": "x", "message": "x"}),
            "write a job's status": lambda: custom.patch_namespaced_custom_object_status(
                "batch.tensorstack.dev", "v1beta1", ns, "genericjobs", ident["name"], {"status": {"phase": "Succeeded"}}),
            "list Services": lambda: core.list_namespaced_service(ns),
        }  # fmt: skip
        for what, call in allowed.items():
            assert _status(call) == 200, f"the {role} may not {what}"
        for what, call in refused.items():
            assert _status(call) == 403, f"the {role} may {what}"
        # The namespaced Role reaches only its namespace; the ClusterRole every namespace.
        elsewhere = _status(
            lambda: custom.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", "default", "genericjobs")
        )
        assert elsewhere == (403 if identities.manifest == "rbac-airflow-namespace.yaml" else 200), role

    for role, kubeconfig in identities.kubeconfigs.items():
        check(role, kubeconfig)
    assert jobs.phase("GenericJob", ident["name"]) == "Running"
    assert len(jobs.pods(ident["name"])) == 2
