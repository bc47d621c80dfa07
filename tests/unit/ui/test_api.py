"""The API's transport: a connection that cannot be used is a clear 503, not a stack trace."""

from __future__ import annotations

import pytest
from fastapi import HTTPException

from airflow_t9k.ui.api import _map_index, hook_transport


class BrokenHook:
    conn_id = "k8s_missing"

    @property
    def api_client(self):
        raise LookupError("The conn_id `k8s_missing` isn't defined")


def test_a_missing_connection_is_a_503_naming_it():
    with pytest.raises(HTTPException) as err:
        hook_transport(BrokenHook())("GET", "/apis/batch.tensorstack.dev/v1beta1/genericjobs")
    assert err.value.status_code == 503
    assert "k8s_missing" in err.value.detail
    assert "ui_kubernetes_conn_id" in err.value.detail


@pytest.mark.parametrize(("raw", "expected"), [(None, -1), ("3", 3), ("-1", -1), ("{MAP_INDEX}", -1), ("", -1)])
def test_map_index_from_the_ui(raw, expected):
    assert _map_index(raw) == expected


def test_loading_the_plugin_does_not_build_the_api_until_it_is_read():
    import subprocess
    import sys

    code = ("import sys; from airflow_t9k.ui.plugin import T9kUiPlugin as P; a = 'airflow_t9k.ui.api' in sys.modules; "
            "apps = P.fastapi_apps; print(a, 'airflow_t9k.ui.api' in sys.modules, apps[0]['url_prefix'], apps[0]['app'] is "
            "P().fastapi_apps[0]['app'])")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines()[-1].split() == ["False", "True", "/t9k", "True"], out.stdout + out.stderr


def test_a_kubernetes_api_that_never_answers_costs_the_ui_a_bounded_wait(monkeypatch):
    """A real client against a real socket that accepts and never answers: the call ends by
    the UI's timeout instead of holding an api-server thread for good."""
    import contextlib
    import socket
    import threading

    from kubernetes.client import ApiClient, Configuration

    from airflow_t9k.ui import api

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    config = Configuration(host=f"http://127.0.0.1:{server.getsockname()[1]}")

    class SilentHook:
        conn_id = "silent"
        api_client = ApiClient(config)

        @contextlib.contextmanager
        def _boundary(self, method, path):
            yield

    monkeypatch.setattr(api, "REQUEST_TIMEOUT", (1, 1))
    outcome = []

    def call():
        try:
            api.hook_transport(SilentHook())("GET", "/api/v1/namespaces/ns/pods")
        except Exception as exc:  # noqa: BLE001 - what ends the call is what this test looks at
            outcome.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout=10)
    server.close()
    assert not worker.is_alive(), "the call still waits for an API server that never answers"
    assert outcome, outcome
    assert "timed out" in str(outcome[0]).lower(), outcome


def test_the_endpoints_run_on_the_uis_own_threads():
    """Airflow's sync routes share one thread pool; ours block on Kubernetes, so they run on
    UI_POOL: every route of the app is a coroutine, and off_pool keeps the signature FastAPI reads."""
    import asyncio
    import threading

    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from airflow_t9k.ui.api import app, off_pool

    for route in app.routes:
        if getattr(route, "methods", None) and hasattr(route, "endpoint"):
            assert asyncio.iscoroutinefunction(route.endpoint), route.path

    probe = FastAPI()

    @probe.get("/where")
    @off_pool
    def where(n: int, tag: str | None = None) -> dict:
        return {"thread": threading.current_thread().name, "n": n, "tag": tag}

    body = TestClient(probe).get("/where", params={"n": "3", "tag": "x"}).json()
    assert body["thread"].startswith("t9k-ui")
    assert (body["n"], body["tag"]) == (3, "x")
    assert TestClient(probe).get("/where").status_code == 422  # n is still a required query parameter


def test_kept_log_lines_go_only_to_users_who_may_read_task_logs(monkeypatch):
    """The T9k Job tab's detail needs read access to task instances; the replicas' log lines the
    controller kept before clean-up are task logs (issue 29, point 7)."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity

    from airflow_t9k.ui import api

    asked = []

    class AuthManager:
        def is_authorized_dag(self, *, method, access_entity=None, details=None, user=None):
            asked.append((method, access_entity, details.id, user))
            return user == "reader-of-logs"

    monkeypatch.setattr(api, "get_auth_manager", lambda: AuthManager())
    kept = {"replicas": [{"pod": "j-worker-0", "log": "Traceback ...", "containers": []}]}
    answer = {"job": {"name": "j", "kept": kept}, "attempts": [{"try": 1, "kept": {"replicas": [{"pod": "j-w-1", "log": "x"}]}}]}
    monkeypatch.setattr(api, "_job_detail", lambda *a: __import__("copy").deepcopy(answer))
    job_detail = api.job_detail.__wrapped__  # the endpoint's own function, off the UI's thread pool
    assert job_detail("reader-of-logs", "d", "r", "t") == answer
    stripped = job_detail("viewer", "d", "r", "t")
    assert stripped["job"]["kept"]["replicas"][0]["log"] is None
    assert stripped["attempts"][0]["kept"]["replicas"][0]["log"] is None
    assert stripped["job"]["kept"]["replicas"][0]["pod"] == "j-worker-0"  # what ended how stays
    assert asked[-1] == ("GET", DagAccessEntity.TASK_LOGS, "d", "viewer")
