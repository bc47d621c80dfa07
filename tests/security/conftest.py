"""Security tests run against the local cluster like the integration tests, with their fixtures:
a real API server, real identities (ServiceAccount tokens bound to the shipped Roles), and a
real controller process started from the code under test."""

from __future__ import annotations

from tests.integration.conftest import controller, controller_factory, crds, jobs  # noqa: F401 - fixtures
