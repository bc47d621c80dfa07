"""/metrics as Prometheus scrapes it (issue 45, item 5): served over HTTPS to a caller whose token
the API server accepts and who may get the non-resource URL /metrics, as controller-runtime's
secure metrics server does (Kueue's, Kubeflow Trainer's). Before, opening it served plain,
unauthenticated HTTP naming every namespace and job.

A controller with ``--metrics-secure``, real ServiceAccount tokens from the TokenRequest API: one
bound to a ClusterRole with ``nonResourceURLs: ["/metrics"]`` (the chart's metrics reader) reads
the metrics; one bound to nothing, a forged token and none at all are refused. The chart's
Service, ClusterRole and ServiceMonitor: tests/unit/deploy/test_chart.py."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
import uuid

from kubernetes import utils

from tests.support.controller import free_port
from tests.support.rbac import delete_cluster_scoped


def _scrape(port: int, token: str | None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = (
        False,
        ssl.CERT_NONE,
    )  # its self-signed certificate, as a ServiceMonitor's insecureSkipVerify
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"https://127.0.0.1:{port}/metrics", headers=headers),
                                    timeout=10, context=context) as r:  # fmt: skip
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_answer_only_a_bound_account_over_https(api_client, core, namespace, controller_factory):
    port = free_port()
    controller_factory("--metrics-secure", "--metrics-port", str(port))
    suffix = uuid.uuid4().hex[:6]
    reader = f"metrics-reader-{suffix}"
    rbac = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": reader},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": reader},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
         "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}]},
    ]  # fmt: skip
    for sa in ("prometheus", "stranger"):
        core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    utils.create_from_yaml(api_client, yaml_objects=rbac)
    try:
        spec = {"spec": {"expirationSeconds": 600}}
        tokens = {
            sa: core.create_namespaced_service_account_token(sa, namespace, spec).status.token
            for sa in ("prometheus", "stranger")
        }
        code, body = _scrape(port, tokens["prometheus"])
        assert code == 200, body
        assert "process_resident_memory_bytes" in body, body[:500]
        assert "controller_runtime_reconcile_total" in body, body[:500]
        assert _scrape(port, tokens["stranger"])[0] == 403
        assert _scrape(port, None)[0] == 401
        forged = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzeXN0ZW06YWRtaW4ifQ."  # alg none, sub system:admin
        assert _scrape(port, forged)[0] == 401
        # Plain HTTP is not served on that port.
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
            raise AssertionError("/metrics answered plain HTTP")
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
    finally:
        delete_cluster_scoped(api_client, rbac)
