"""Real-node tests: replicas run as real processes on the local cluster's real node.

The node (``scripts/local-cluster.sh up --real-node``) must be there and Ready: a missing node
fails these tests rather than skipping them, since skipping would hide exactly what they exist
to catch. ``-m "not real"`` leaves them out on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest import controller, controller_factory, crds, jobs  # noqa: F401  (shared fixtures)
from tests.real.support import REAL_NODE, RealPods, ensure_code


@pytest.fixture(scope="session")
def real_node(core) -> str:
    from kubernetes.client.exceptions import ApiException

    try:
        node = core.read_node(REAL_NODE)
    except ApiException as exc:
        if exc.status != 404:
            raise
        pytest.fail(f"node {REAL_NODE} is missing: start the cluster with `scripts/local-cluster.sh up --real-node` "
                    "(or T9K_REAL_NODE=1), or leave these tests out with -m 'not real'")  # fmt: skip
    ready = [c.status for c in node.status.conditions or [] if c.type == "Ready"]
    assert ready == ["True"], f"node {REAL_NODE} is not Ready: {node.status.conditions}"
    return REAL_NODE


@pytest.fixture
def real(api_client, namespace, real_node, jobs) -> Iterator[RealPods]:
    """The test namespace with the test programs as ConfigMap ``code`` (mounted at /code)."""
    ensure_code(jobs.core, namespace)
    return RealPods(jobs.core, namespace)
