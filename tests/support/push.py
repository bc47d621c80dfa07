"""Reaching the controller's progress endpoint as a replica would (docs/progress.md, "The push path")."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from tests.support.controller import free_port

if TYPE_CHECKING:
    from kubernetes import client

AUDIENCE = "airflow-t9k-progress"
CA_ANNOTATION = "batch.tensorstack.dev/progress-ca"


# The controller takes a report only from an address of the pod the token names
# (--progress-check-source-ip, on by default). The tests POST from this machine, as the pods' own
# programs would from theirs: kwok gives a hostNetwork pod its node's address, 127.0.0.1 on the
# local cluster (scripts/local-cluster.sh, kwok --node-ip), so such a pod's tests push from its
# address. On an external cluster (T9K_TEST_KUBECONFIG) the pods' addresses are elsewhere: the
# check is off there.
FROM_HERE = {"hostNetwork": True}


def push_flags(port: int | None = None, host: str = "127.0.0.1", address: str = "127.0.0.1",
               check_source: bool = True) -> tuple[int, list[str]]:  # fmt: skip
    """A free port and the controller flags that turn the push path on there (a CA made at start)."""
    port = port or free_port()
    flags = ["--progress-endpoint", f"https://{host}:{port}", "--progress-address", address, "--progress-port", str(port)]
    return port, flags + ([] if check_source else ["--progress-check-source-ip", "off"])


def token(core: client.CoreV1Api, namespace: str, pod: client.V1Pod | None, audience: str = AUDIENCE,
          service_account: str = "default", seconds: int = 600) -> str:  # fmt: skip
    """A token from the TokenRequest API, bound to ``pod`` (as the kubelet's projected volume gets one)."""
    spec: dict[str, Any] = {"audiences": [audience], "expirationSeconds": seconds}
    if pod is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid}
    answer = core.create_namespaced_service_account_token(service_account, namespace, {"spec": spec})
    return str(answer.status.token)


def env_of(pod: client.V1Pod, container: int = 0) -> dict[str, str]:
    return {e.name: e.value for e in pod.spec.containers[container].env or []}


def post(url: str, token: str | None, body: Any, ca_pem: str, timeout: float = 10) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON answer) of one POST, verifying the endpoint with ``ca_pem``."""
    context = ssl.create_default_context(cadata=ca_pem)
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
