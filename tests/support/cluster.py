"""Bringing up (or reusing) the Kubernetes control plane the integration tests run against."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tests.support import locks

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local-cluster.sh"
LOCAL_KUBECONFIG = ROOT / ".local-cluster" / "kubeconfig"
STARTED_BY = ROOT / ".local-cluster" / "started-by-test-run"  # the id of the test run that started the cluster

T = TypeVar("T")


class LocalCluster:
    """The cluster named by ``T9K_TEST_KUBECONFIG``, or the project's local one.

    The local cluster is started only when it is not already running, and stopped at the end
    of the test run only if this run started it, so a developer's running cluster is left alone.
    Under pytest-xdist every worker calls ``ensure_up``: one starts the cluster, the others wait
    for it (a file lock), and the controller process stops it once every worker is done
    (``stop_if_started_by``, from ``pytest_sessionfinish``): a worker that ends early must not
    take the cluster from the others.
    """

    def __init__(self) -> None:
        external = os.environ.get("T9K_TEST_KUBECONFIG")
        self.kubeconfig = Path(external) if external else LOCAL_KUBECONFIG
        self.external = bool(external)

    def ensure_up(self, run_id: str = "") -> None:
        if self.external:
            return
        with locks.start(self.kubeconfig):
            running = subprocess.run([str(SCRIPT), "status"], check=False, capture_output=True).returncode == 0
            if not running:
                # With the real node, unless told otherwise: tests/real need it, and a test run
                # should not pass by leaving out what it could not start.
                real = [] if os.environ.get("T9K_REAL_NODE") == "0" else ["--real-node"]
                subprocess.run([str(SCRIPT), "up", *real], check=True)
                STARTED_BY.write_text(run_id)

    @staticmethod
    def stop_if_started_by(run_id: str) -> None:
        """``down``, if the test run ``run_id`` started the cluster (and T9K_KEEP_CLUSTER is unset)."""
        try:
            starter = STARTED_BY.read_text()
        except FileNotFoundError:
            return
        if starter == run_id and not os.environ.get("T9K_KEEP_CLUSTER"):
            STARTED_BY.unlink()
            subprocess.run([str(SCRIPT), "down"], check=False)

    def pod_log(self, namespace: str) -> Path:
        """The file kwok serves as the log of every pod of ``namespace`` (tools/kwok/namespace-logs.patch)."""
        return self.kubeconfig.parent / "pod-logs" / namespace / "all.log"

    def own_pod_log(self, namespace: str) -> None:
        """Give ``namespace`` a pod-log file of its own, before any of its pods' log is read: what
        a test "prints" there reaches its own pods only, not those of the tests running beside it."""
        if self.external:
            return
        path = self.pod_log(namespace)
        path.parent.mkdir(parents=True, exist_ok=True)
        # The shared file's first line, stamped when the cluster started: a line stamped now would
        # fall inside a follower's sinceTime (one-second resolution) and count as the job's output.
        shared = self.kubeconfig.parent / "pod-logs" / "all.log"
        try:
            with open(shared) as f:
                first = f.readline()
        except FileNotFoundError:
            first = ""
        path.write_text(first or "2000-01-01T00:00:00.000000000Z stdout F container started (simulated by kwok)\n")

    def print_to_pods(self, namespace: str, text: str) -> None:
        """Append CRI-format log lines to the log of every pod of ``namespace``, as if they printed them."""
        path = self.pod_log(namespace)
        if not path.exists():
            raise AssertionError(f"namespace {namespace!r} has no pod-log file of its own ({path}): "
                                 "create it with the `namespace` fixture or LocalCluster.own_pod_log")  # fmt: skip
        with open(path, "a") as f:
            f.write(text)


def wait_until(check: Callable[[], T], timeout: float = 30.0, interval: float = 0.2, what: str = "") -> T:
    """Return the first truthy result of ``check``; fail the test with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    last: T = check()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}: last={last!r}")
        time.sleep(interval)
        last = check()
    return last


def delete_namespace(core: Any, name: str, timeout: float = 120) -> None:
    """Delete a namespace (gone already is fine) and wait until the API server has removed it."""
    from kubernetes.client.exceptions import ApiException

    def exists() -> bool:
        try:
            core.read_namespace(name)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise

    try:
        core.delete_namespace(name, propagation_policy="Background")
    except ApiException as exc:
        if exc.status != 404:
            raise
    wait_until(lambda: not exists(), timeout=timeout, interval=1, what=f"namespace {name} gone")


@contextlib.contextmanager
def own_namespace(cluster: LocalCluster, core) -> Iterator[str]:
    """A namespace of the test's own (or a module's), with its own pod log, deleted afterwards."""
    from kubernetes import client

    name = f"t9k-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"airflow-t9k/test": "true"})))
    cluster.own_pod_log(name)
    # The ServiceAccount admission plugin rejects pods until KCM creates `default`.
    wait_until(lambda: has_default_sa(core, name), timeout=30, what=f"serviceaccount default in {name}")
    try:
        yield name
    finally:
        core.delete_namespace(name, propagation_policy="Background")


def has_default_sa(core, namespace: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespaced_service_account("default", namespace)
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
