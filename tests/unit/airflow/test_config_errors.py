"""A worker whose Kubernetes configuration cannot be loaded fails the task with one sentence that
names the connection and the fix, not the client library's ConfigException (issue 28, point 7)."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowException

from tests.support.task import context
from tests.unit.airflow.test_operators import op


def _fails(monkeypatch, **kw) -> str:
    with pytest.raises(AirflowException) as exc:
        op(deferrable=False, **kw).execute(context())
    text = str(exc.value)
    assert type(exc.value).__name__ == "KubeConfigError", (type(exc.value), text)
    return text


def test_a_kubeconfig_that_does_not_exist(monkeypatch, tmp_path):
    missing = tmp_path / "no-such-kubeconfig"
    text = _fails(monkeypatch, kubernetes_conn_id=None, config_file=str(missing))
    assert text.startswith(f"the worker's identity (kubeconfig {missing}) cannot load its Kubernetes configuration")
    assert "point config_file= (or the connection's kube_config_path) at a kubeconfig readable on this machine" in text


def test_a_context_the_kubeconfig_does_not_have(monkeypatch, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "a", "context": {"cluster": "k", "user": "u"}}],
    }))  # fmt: skip
    monkeypatch.setenv(
        "AIRFLOW_CONN_K8S_TEAM", json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}})
    )
    text = _fails(monkeypatch, kubernetes_conn_id="k8s_team", cluster_context="team-b")
    assert "the worker's identity (connection 'k8s_team')" in text
    assert "team-b" in text
    assert "set cluster_context= (or the connection's cluster_context) to one of the kubeconfig's contexts" in text


def test_a_connection_that_does_not_exist(monkeypatch):
    text = _fails(monkeypatch, kubernetes_conn_id="k8s_nowhere", namespace=None)
    assert "the worker's identity (connection 'k8s_nowhere') cannot load its Kubernetes configuration" in text
    assert "create that kubernetes connection" in text
