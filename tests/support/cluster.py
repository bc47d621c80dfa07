"""Bringing up (or reusing) the Kubernetes control plane the integration tests run against."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local-cluster.sh"
LOCAL_KUBECONFIG = ROOT / ".local-cluster" / "kubeconfig"

T = TypeVar("T")


class LocalCluster:
    """The cluster named by ``T9K_TEST_KUBECONFIG``, or the project's local one.

    The local cluster is started only when it is not already running, and stopped at the
    end only if this object started it, so a developer's running cluster is left alone.
    """

    def __init__(self) -> None:
        self.started_here = False
        external = os.environ.get("T9K_TEST_KUBECONFIG")
        self.kubeconfig = Path(external) if external else LOCAL_KUBECONFIG
        self.external = bool(external)

    def ensure_up(self) -> None:
        if self.external:
            return
        running = subprocess.run([str(SCRIPT), "status"], check=False, capture_output=True).returncode == 0
        if not running:
            # With the real node, unless told otherwise: tests/real need it, and a test run
            # should not pass by leaving out what it could not start.
            real = [] if os.environ.get("T9K_REAL_NODE") == "0" else ["--real-node"]
            subprocess.run([str(SCRIPT), "up", *real], check=True)
            self.started_here = True

    def stop_if_started(self) -> None:
        if self.started_here and not os.environ.get("T9K_KEEP_CLUSTER"):
            subprocess.run([str(SCRIPT), "down"], check=False)


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
