"""Fault tests share the integration fixtures: a real cluster, CRDs, controllers per namespace.

Each test reports its figures (kills, duplicates, orphans, recovery times) through
``figures``; they are printed at the end of the run, pass or fail.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import controller, controller_factory, crds, jobs  # noqa: F401 - fixtures

FIGURES: list[str] = []


@pytest.fixture
def figures(request: pytest.FixtureRequest):
    def report(line: str) -> None:
        FIGURES.append(f"{request.node.name}: {line}")
        print(f"\n[chaos] {line}")

    return report


def pytest_terminal_summary(terminalreporter) -> None:
    if FIGURES:
        terminalreporter.section("fault-test figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
