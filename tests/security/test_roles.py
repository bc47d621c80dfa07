"""The roles Airflow's identities are given (deploy/rbac-airflow-*.yaml), tried with their real
tokens: a DAG author reads no ConfigMap outside the namespaces jobs go to (issue 29, 6), and the
UI's identity reads what the T9k pages read, by the routes they take, and writes nothing unless
given the actions role."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, utils
from kubernetes.client.exceptions import ApiException

from airflow_t9k.k8s.errors import Forbidden, from_response
from airflow_t9k.ui.reader import Reader
from tests.builders import generic
from tests.integration.test_airflow_rbac import _apply_rbac
from tests.support.cluster import wait_until
from tests.support.rbac import delete_cluster_scoped

ROOT = Path(__file__).resolve().parents[2]


def _other_namespace(core) -> str:
    name = f"t9k-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"airflow-t9k/test": "true"}}})
    return name


def test_a_dag_author_reads_no_configmap_outside_the_job_namespaces(api_client, cluster, core, namespace, crds, tmp_path):
    """The cluster-wide variant used to grant ``configmaps get`` everywhere: Airflow's own
    namespace, other teams' configuration. Now only where its evidence RoleBinding is (``namespace``)."""
    kubeconfigs, docs = _apply_rbac(api_client, cluster, namespace, "rbac-airflow-cluster.yaml", tmp_path)
    other = _other_namespace(core)
    try:
        core.create_namespaced_config_map(other, {"metadata": {"name": "airflow-config"}, "data": {"sql_alchemy_conn": "x"}})
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "j-evidence"}, "data": {"summary.json": "{}"}})
        worker = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfigs["worker"])))
        with pytest.raises(ApiException) as refused:
            worker.read_namespaced_config_map("airflow-config", other)
        assert refused.value.status == 403, refused.value.body
        with pytest.raises(ApiException) as refused:
            worker.read_namespaced_config_map("kube-root-ca.crt", "kube-system")
        assert refused.value.status == 403
        assert worker.read_namespaced_config_map("j-evidence", namespace).data == {"summary.json": "{}"}
        with pytest.raises(ApiException) as refused:
            worker.list_namespaced_config_map(namespace)  # by name only
        assert refused.value.status == 403
    finally:
        core.delete_namespace(other)
        delete_cluster_scoped(api_client, docs)


def _ui_identity(api_client, cluster, core, namespace: str, tmp_path: Path, actions: bool) -> tuple[client.ApiClient, list]:
    """A ServiceAccount bound to deploy/rbac-airflow-ui.yaml's read role (and its actions role), in
    ``namespace`` (the file's Roles are for `ml-jobs`)."""
    suffix = uuid.uuid4().hex[:6]
    sa = f"airflow-api-server-{suffix}"
    text = (ROOT / "deploy" / "rbac-airflow-ui.yaml").read_text().replace("airflow-t9k-ui-", f"airflow-t9k-ui-{suffix}-")
    text = (
        text.replace("name: airflow-api-server\n", f"name: {sa}\n")
        .replace("namespace: airflow\n", f"namespace: {namespace}\n")
        .replace("namespace: ml-jobs\n", f"namespace: {namespace}\n")
    )
    docs = [d for d in yaml.safe_load_all(text) if d and (actions or not d["metadata"]["name"].endswith("actions"))]
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    utils.create_from_yaml(api_client, yaml_objects=docs)
    token = core.create_namespaced_service_account_token(sa, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    base = yaml.safe_load(cluster.kubeconfig.read_text())
    base["users"] = [{"name": "sa", "user": {"token": token}}]
    base["contexts"][0]["context"]["user"] = "sa"
    path = tmp_path / f"kubeconfig-ui-{suffix}"
    path.write_text(yaml.safe_dump(base))
    return config.new_client_from_config(config_file=str(path)), docs


def _transport(api: client.ApiClient):
    """The UI reader's transport (ui/api.py's hook_transport) over this identity's client."""

    def request(method: str, path: str, *, body: Any = None, query: list | None = None,
                content_type: str = "application/json", raw: bool = False) -> Any:  # fmt: skip
        try:
            resp = api.call_api(path, method, query_params=query or [], body=body, auth_settings=["BearerToken"],
                                _preload_content=False, header_params={"Accept": "*/*" if raw else "application/json",
                                                                       "Content-Type": content_type})  # fmt: skip
        except ApiException as exc:
            raise from_response(exc.status, exc.body if isinstance(exc.body, str) else (exc.body or b"").decode()) from None
        data = resp.data.decode() if resp.data else ""
        return data if raw else (json.loads(data) if data else {})

    return request


@pytest.mark.parametrize("actions", [False, True], ids=["read-only", "with-actions"])
def test_the_ui_role_reads_what_the_tab_reads_and_writes_only_with_the_actions_role(
    api_client, cluster, core, namespace, jobs, controller, tmp_path, actions
):
    job = generic("ui-read", ("worker", 1))
    key = ("d", "r", "t", -1)
    job["metadata"]["annotations"] = {f"airflow-t9k.io/{k}": v for k, v in zip(("dag-id", "run-id", "task-id", "map-index"),
                                                                              ("d", "r", "t", "-1"), strict=True)}  # fmt: skip
    job["metadata"]["labels"] = {"airflow-t9k.io/dag-id": "d"}
    created = jobs.create(job)
    wait_until(lambda: jobs.pods("ui-read"), timeout=30, what="the job's pod")
    api, docs = _ui_identity(api_client, cluster, core, namespace, tmp_path, actions)
    try:
        reader = Reader(_transport(api), namespace=namespace, kinds=["GenericJob"])
        identity = {"kind": "GenericJob", "namespace": namespace, "name": "ui-read", "uid": created["metadata"]["uid"]}
        assert [j["metadata"]["name"] for j in reader.jobs()] == ["ui-read"]  # the page's LIST
        found = reader.recorded_job(identity, key)
        assert found is not None
        assert [p["metadata"]["name"] for p in reader.pods(found)] == ["ui-read-worker-0"]
        reader.events(found)
        assert isinstance(reader.log(namespace, "ui-read-worker-0", 5), str)
        assert reader.evidence(found) is None  # a get by name (404: none kept yet), allowed
        ui = client.CoreV1Api(api)
        for denied in (lambda: ui.list_namespaced_config_map(namespace), lambda: ui.list_namespaced_secret(namespace),
                       lambda: ui.create_namespaced_pod(namespace, {"metadata": {"name": "x"},
                                                                    "spec": {"containers": [{"name": "c", "image": "i"}]}}),
                       lambda: client.CustomObjectsApi(api).create_namespaced_custom_object(
                           "batch.tensorstack.dev", "v1beta1", namespace, "genericjobs", generic("made-by-ui", ("worker", 1))),
                       lambda: ui.list_namespaced_pod(namespace, watch=True, timeout_seconds=1)):  # fmt: skip
            with pytest.raises(ApiException) as refused:
                denied()
            assert refused.value.status == 403
        if actions:
            reader.pause(found)
            wait_until(lambda: jobs.phase("GenericJob", "ui-read") == "Paused", timeout=30, what="paused by the UI's identity")
            reader.delete(found)
        else:
            with pytest.raises(Forbidden):
                reader.pause(found)
            with pytest.raises(Forbidden):
                reader.delete(found)
            assert jobs.phase("GenericJob", "ui-read") != "Paused"
    finally:
        delete_cluster_scoped(api_client, docs)


def test_the_cluster_wide_ui_role_reads_no_configmap_outside_the_job_namespaces(api_client, cluster, core, namespace, crds,
                                                                                tmp_path):  # fmt: skip
    """Issue 45, item 6: with ``airflow.rbac.clusterWide`` the UI's read role granted ``configmaps
    get`` in every namespace (Airflow's own configuration, other teams'); a stolen api-server token
    read them all. Now the evidence ConfigMaps are read only where the chart binds them per
    namespace (``airflow.rbac.namespaces``). The chart rendered as a user would, its UI roles
    applied, a real token for the UI's identity."""
    from tests.support.chart import render

    suffix = uuid.uuid4().hex[:6]
    sa = f"airflow-api-server-{suffix}"
    subject = {"kind": "ServiceAccount", "name": sa, "namespace": namespace}
    values = {"airflow.rbac.clusterWide": True, "airflow.rbac.namespaces": [namespace], "airflow.rbac.ui.actions": False,
              "airflow.rbac.ui.subjects": [subject], "crds.install": False}  # fmt: skip
    docs = [o for o in render(values) if o["metadata"]["name"].startswith("airflow-t9k-ui-")]
    assert {o["kind"] for o in docs} == {"ClusterRole", "ClusterRoleBinding", "RoleBinding"}, docs
    for o in docs:  # unique names: other tests on this cluster render the same chart
        o["metadata"]["name"] = o["metadata"]["name"].replace("airflow-t9k-ui-", f"airflow-t9k-ui-{suffix}-")
        if "roleRef" in o:
            o["roleRef"]["name"] = o["roleRef"]["name"].replace("airflow-t9k-ui-", f"airflow-t9k-ui-{suffix}-")
    other = _other_namespace(core)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    utils.create_from_yaml(api_client, yaml_objects=docs)
    try:
        core.create_namespaced_config_map(other, {"metadata": {"name": "airflow-config"}, "data": {"sql_alchemy_conn": "x"}})
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "j-evidence"}, "data": {"summary.json": "{}"}})
        from tests.support.rbac import account_client

        ui = client.CoreV1Api(account_client(core, cluster.kubeconfig, namespace, sa, tmp_path / "kubeconfig-ui-cluster"))
        wait_until(lambda: ui.read_namespaced_config_map("j-evidence", namespace).data == {"summary.json": "{}"}, timeout=20,
                   what="the evidence read where it is bound")  # fmt: skip
        for name, ns in (("airflow-config", other), ("kube-root-ca.crt", "kube-system")):
            with pytest.raises(ApiException) as refused:
                ui.read_namespaced_config_map(name, ns)
            assert refused.value.status == 403, refused.value.body
        assert ui.list_namespaced_pod(other).items == []  # what the pages read, it still reads everywhere
    finally:
        core.delete_namespace(other)
        delete_cluster_scoped(api_client, docs)
