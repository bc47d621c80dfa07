"""Shared pytest wiring.

Unit tests need nothing. Tests marked ``integration`` get a real control plane: the local
one from ``scripts/local-cluster.sh`` (started on first use), or the cluster named by
``T9K_TEST_KUBECONFIG``. Each integration test gets its own namespace, deleted afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.support.cluster import LocalCluster, wait_until

# Triggers run in this process have no scheduler, so none of the race the trigger's hold is for
# (apache/airflow#72716, [t9k] deferral_hold_seconds): no hold here. Airflow run as processes
# (tests/support/airflow.py, `airflow dags test`) drops AIRFLOW* variables and keeps the default.
os.environ.setdefault("AIRFLOW__T9K__DEFERRAL_HOLD_SECONDS", "0")


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    c = LocalCluster()
    c.ensure_up()
    try:
        yield c
    finally:
        c.stop_if_started()


@pytest.fixture(scope="session")
def api_client(cluster: LocalCluster):
    from kubernetes import config

    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


@pytest.fixture(scope="session")
def core(api_client):
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(core) -> Iterator[str]:
    from kubernetes import client

    name = f"t9k-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"airflow-t9k/test": "true"})))
    # The ServiceAccount admission plugin rejects pods until KCM creates `default`.
    wait_until(lambda: _has_default_sa(core, name), timeout=30, what=f"serviceaccount default in {name}")
    try:
        yield name
    finally:
        core.delete_namespace(name, propagation_policy="Background")


def _has_default_sa(core, namespace: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespaced_service_account("default", namespace)
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Anything under tests/integration, tests/chaos, tests/security, tests/real or tests/deploy needs the cluster.
    for item in items:
        path = str(item.fspath)
        if any(f"/tests/{d}/" in path for d in ("integration", "chaos", "security", "real", "deploy")):
            item.add_marker(pytest.mark.integration)
        if "/tests/deploy/" in path:  # the chart installed: a cluster-wide controller, CRDs, a Lease
            item.add_marker(pytest.mark.deploy)
            item.add_marker(pytest.mark.serial)
        if "/tests/real/" in path:
            item.add_marker(pytest.mark.real)
        if "/chaos/" in path:
            item.add_marker(pytest.mark.chaos)
