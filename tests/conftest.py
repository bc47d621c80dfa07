"""Shared pytest wiring.

Unit tests need nothing. Tests marked ``integration`` get a real control plane: the local
one from ``scripts/local-cluster.sh`` (started on first use), or the cluster named by
``T9K_TEST_KUBECONFIG``. Each integration test gets its own namespace, deleted afterwards.

Parallel runs (pytest-xdist, docs/testing.md "Parallel workers"): one worker starts the cluster
and the controller process stops it; a ``serial`` test has the cluster to itself; the real-node
tests run one at a time; under ``--dist loadgroup`` (tests/support/xdist.py) the tests of a
module that shares a fixture between its tests (an Airflow started once per module) stay on one
worker, and so do the real-node tests.
"""

from __future__ import annotations

import json
import os
import resource
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import locks, xdist
from tests.support.cluster import LocalCluster, own_namespace

# Triggers run in this process have no scheduler, so none of the race the trigger's hold is for
# (apache/airflow#72716, [t9k] deferral_hold_seconds): no hold here, nor in `airflow dags test`
# (tests/integration/test_airflow_dags.py). A real Airflow (tests/support/airflow.py) drops
# AIRFLOW* variables and keeps the default.
os.environ.setdefault("AIRFLOW__T9K__DEFERRAL_HOLD_SECONDS", "0")

RUN_ID = pytest.StashKey[str]()
# One line per test (its worker, when it started and ended), read by scripts/test-timeline.py:
# which tests the wall time waited on, and how long the workers sat idle at the end.
TIMELINE = Path(__file__).resolve().parents[1] / ".local-cluster" / "test-logs" / "timeline.jsonl"


def pytest_configure(config: pytest.Config) -> None:
    # One id for the whole run, workers included: the run that started the cluster stops it.
    workerinput = getattr(config, "workerinput", None)
    config.stash[RUN_ID] = workerinput["t9k_run_id"] if workerinput else uuid.uuid4().hex


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # pytest-xdist, in the controller process: what each worker gets
    node.workerinput["t9k_run_id"] = node.config.stash[RUN_ID]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log) -> object | None:  # pytest-xdist, in the controller process
    if config.getvalue("dist") != "loadgroup":
        return None
    return xdist.GroupScheduling(config, log, config.stash[RUN_ID])


@pytest.hookimpl(tryfirst=True)  # before the worker sends its collection to the scheduler
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        xdist.write_groups(session.items, config.stash[RUN_ID])


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller process (or a run without workers)
        xdist.groups_file(session.config.stash[RUN_ID]).unlink(missing_ok=True)
        LocalCluster.stop_if_started_by(session.config.stash[RUN_ID])


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> LocalCluster:
    c = LocalCluster()
    c.ensure_up(request.config.stash[RUN_ID])
    return c


@pytest.fixture(scope="session")
def api_client(cluster: LocalCluster):
    from kubernetes import config

    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


@pytest.fixture(scope="session")
def core(api_client):
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(cluster: LocalCluster, core) -> Iterator[str]:
    with own_namespace(cluster, core) as name:
        yield name


@pytest.hookimpl(tryfirst=True)  # before the other plugins read the marks
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
            item.add_marker(pytest.mark.xdist_group("real-node"))
        elif _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if isinstance(item, pytest.Function) else path))
        if "/chaos/" in path:  # kills, outages, leader elections, load: never beside other tests
            item.add_marker(pytest.mark.chaos)
            item.add_marker(pytest.mark.serial)


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the item uses a module-scoped fixture defined in its own module, or imported into
    it (an Airflow started once for the module's tests): then its module runs on one worker, which
    sets it up once. (tests/security/test_ui_tenancy.py imports test_ui's Airflow stack: spread
    over three workers, it started three.)"""
    info = getattr(item, "_fixtureinfo", None)
    if info is None or not isinstance(item, pytest.Function):
        return False
    module = item.module.__name__
    path = item.nodeid.split("::", 1)[0]
    for defs in info.name2fixturedefs.values():
        for d in defs:
            if d.scope in ("module", "package") and (getattr(d.func, "__module__", None) == module or d.baseid == path):
                return True
    return False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """An integration test holds the cluster shared, a ``serial`` one holds it alone; a real-node
    test also holds the real node. Whatever runs them (one process, xdist workers, two runs on one
    cluster), a serial test never runs beside another."""
    if item.get_closest_marker("integration") is None:
        return (yield)
    kubeconfig = LocalCluster().kubeconfig
    with locks.cluster_share(kubeconfig, alone=item.get_closest_marker("serial") is not None):
        started, cpu = time.time(), _cpu()
        try:
            if item.get_closest_marker("real") is None:
                return (yield)
            with locks.real_node(kubeconfig):
                return (yield)
        finally:
            _record(item, started, _cpu() - cpu)


def _cpu() -> float:
    """CPU-seconds of this worker and of its children that have ended (the test's controllers,
    its Airflow processes: a module's Airflow counts in the module's last test)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _record(item: pytest.Item, started: float, cpu: float) -> None:
    worker = getattr(item.config, "workerinput", {}).get("workerid", "main")
    line = {"run": item.config.stash[RUN_ID], "worker": worker, "test": item.nodeid, "start": started, "end": time.time(),
            "cpu": round(cpu, 2)}  # fmt: skip
    TIMELINE.parent.mkdir(parents=True, exist_ok=True)
    with TIMELINE.open("a") as f:  # one short line per write: appends from the workers do not interleave
        f.write(json.dumps(line) + "\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fault tests' figures (tests/chaos/conftest.py `figures`), pass or fail. Here, not in
    tests/chaos/, because the process that prints under pytest-xdist loads only this conftest."""
    lines: dict[str, None] = {}  # each phase's report carries the lines so far: once each, in order
    for reports in terminalreporter.stats.values():
        for rep in reports:
            for key, line in getattr(rep, "user_properties", ()):
                if key == "figures":
                    lines[line] = None
    if lines:
        terminalreporter.section("fault-test figures")
        for line in lines:
            terminalreporter.write_line(line)
