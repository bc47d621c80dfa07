"""Fault tests share the integration fixtures: a real cluster, CRDs, controllers per namespace.

Each test reports its figures (kills, duplicates, orphans, recovery times) through
``figures``; they are printed at the end of the run, pass or fail.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import controller, controller_factory, crds, jobs  # noqa: F401 - fixtures


@pytest.fixture
def figures(request: pytest.FixtureRequest):
    # Kept in the test's report, which pytest-xdist carries from a worker to the process that
    # prints the summary (tests/conftest.py), as under `pytest -n 4 tests/chaos`.
    def report(line: str) -> None:
        request.node.user_properties.append(("figures", f"{request.node.name}: {line}"))
        print(f"\n[chaos] {line}")

    return report
