"""Integration fixtures: CRDs installed once, and a real controller process per test namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.controller import ControllerProcess
from tests.support.jobs import Jobs, install_crds

if TYPE_CHECKING:
    from tests.support.cluster import LocalCluster

LOG_DIR = Path(__file__).resolve().parents[2] / ".local-cluster" / "test-logs"


@pytest.fixture(scope="session")
def crds(api_client) -> None:
    install_crds(api_client)


@pytest.fixture
def jobs(api_client, namespace, crds) -> Jobs:
    return Jobs(api_client, namespace)


@pytest.fixture
def controller_factory(cluster: LocalCluster, namespace: str, crds) -> Iterator:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    started: list[ControllerProcess] = []

    def start(*extra: str, kubeconfig: Path | None = None, ns: str | None = namespace, wait: bool = True) -> ControllerProcess:
        proc = ControllerProcess(kubeconfig or cluster.kubeconfig, ns, LOG_DIR, *extra).start(wait=wait)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def controller(controller_factory) -> ControllerProcess:
    return controller_factory()
