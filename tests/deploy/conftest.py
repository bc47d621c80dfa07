"""The deployed controller (docs/install.md): the Helm chart installed as `make deploy-local`
installs it, the controller in-cluster on the real node with nothing but the chart's RBAC.

One release is shared by the whole package (installed before its first test, removed after its
last, so no other test meets a deployed controller). A test that changes it (another scope, an
upgrade, a failover, an uninstall) may leave it changed: every test that uses it starts by putting
it back to the shared defaults (`release`), so no test depends on another's order or leftovers.
Every test fails if a controller pod's log says the API server refused it a right.

These tests need the whole cluster (a cluster-wide controller, CRDs, a Lease): marked serial.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.real.support import REAL_NODE
from tests.support.chart import SCRIPT
from tests.support.cluster import LocalCluster, has_default_sa, wait_until
from tests.support.deploy import MANAGED, Release, script
from tests.support.jobs import Jobs

if TYPE_CHECKING:
    from collections.abc import Iterator

# The controller pods' logs are kept beside the tests' own controllers' (tests/integration).
LOG_DIR = Path(__file__).resolve().parents[2] / ".local-cluster" / "test-logs"


@pytest.fixture(scope="package")
def controller_image(cluster: LocalCluster, core) -> str:
    """The controller's image, built (cached by content) and imported into the real node."""
    try:
        node = core.read_node(REAL_NODE)
    except ApiException as exc:
        pytest.fail(f"node {REAL_NODE} is missing ({exc.status}): the deployed controller runs there; start the cluster "
                    "with `scripts/local-cluster.sh up --real-node`, or leave these tests out with -m 'not deploy'")  # fmt: skip
    assert [c.status for c in node.status.conditions or [] if c.type == "Ready"] == ["True"], f"{REAL_NODE} is not Ready"
    return script("image", "import", "controller")


@pytest.fixture(scope="package")
def kueue_running(cluster: LocalCluster) -> None:
    """Kueue before the controller starts: it decides at start whether queues go through it."""
    if subprocess.run([str(SCRIPT), "kueue", "status"], capture_output=True, check=False).returncode != 0:
        subprocess.run([str(SCRIPT), "kueue", "up"], check=True)


@pytest.fixture(scope="package")
def shared_release(cluster: LocalCluster, api_client, controller_image: str, kueue_running) -> Iterator[Release]:
    release = Release(cluster, api_client, controller_image)
    release.remove()  # a release left by an interrupted run (or `make deploy-local`) is not ours to reuse
    release.install()
    try:
        yield release
    finally:
        release.remove()


@pytest.fixture
def release(shared_release: Release) -> Iterator[Release]:
    """The shared release, as the defaults make it, and no right refused while the test ran."""
    shared_release.ensure_default()
    yield from _no_refusal(shared_release)


@pytest.fixture
def release_as_left(shared_release: Release) -> Iterator[Release]:
    """The shared release as the test before left it (installed, with the defaults if it was
    not), and no right refused while the test ran: for a test whose first step is an upgrade to
    values of its own (the scope tests), a rollout to the defaults less."""
    shared_release.ensure_installed()
    yield from _no_refusal(shared_release)


def _no_refusal(shared_release: Release) -> Iterator[Release]:
    before = shared_release.refusals()
    assert not before, "the controller was refused rights at start:\n" + "\n".join(line for _, line in sorted(before))
    yield shared_release
    refused = shared_release.refusals(keep_in=LOG_DIR) - before
    assert not refused, ("the controller was refused by its RBAC, so the chart lacks a right it uses:\n"
                         + "\n".join(f"{pod}: {line}" for pod, line in sorted(refused)))  # fmt: skip


@pytest.fixture
def managed(core) -> Iterator[str]:
    """A namespace the chart's default scope reconciles (labelled airflow-t9k.io/jobs=enabled)."""
    yield from _namespace(core, MANAGED)


@pytest.fixture
def unmanaged(core) -> Iterator[str]:
    yield from _namespace(core, {})


def _namespace(core: client.CoreV1Api, labels: dict[str, str]) -> Iterator[str]:
    name = f"t9k-deploy-{uuid.uuid4().hex[:8]}"
    meta = client.V1ObjectMeta(name=name, labels={"airflow-t9k/test": "true", **labels})
    core.create_namespace(client.V1Namespace(metadata=meta))
    wait_until(lambda: has_default_sa(core, name), timeout=30, what=f"serviceaccount default in {name}")
    try:
        yield name
    finally:
        core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def jobs(api_client, managed: str) -> Jobs:
    """Jobs in the managed namespace. Not the integration tests' `jobs`: its `crds` fixture replaces
    the CRDs, which would take them from the release (and their keep policy with them)."""
    return Jobs(api_client, managed)
