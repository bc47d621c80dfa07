"""The Debug -> Pause -> Resume walk every kind's integration tests take."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.support.cluster import wait_until

if TYPE_CHECKING:
    from tests.support.jobs import Jobs


def debug_pause_resume(jobs: Jobs, kind: str, name: str, check_debug: Callable[[dict], None],
                       check_resumed: Callable[[dict], None]) -> None:  # fmt: skip
    """The job was created with Debug on: check its pods, pause it, unpause it, check again."""
    jobs.wait_phase(kind, name, "Running")
    check_debug(jobs.pods(name))
    jobs.patch(kind, name, {"spec": {"runMode": {"debug": {"enabled": False}, "pause": {"enabled": True}}}})
    jobs.wait_phase(kind, name, "Paused")
    wait_until(lambda: jobs.pods(name) == {}, what=f"{kind} {name} paused")
    jobs.patch(kind, name, {"spec": {"runMode": {"pause": {"enabled": False}}}})
    jobs.wait_phase(kind, name, "Running", timeout=30)
    check_resumed(jobs.pods(name))
