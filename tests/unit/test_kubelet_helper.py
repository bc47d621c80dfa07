"""The kubelet-style helper builds the same status a kubelet would report."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.support.kubelet import terminal_status


def pod(*names: str) -> client.V1Pod:
    return client.V1Pod(spec=client.V1PodSpec(containers=[client.V1Container(name=n, image="img") for n in names]))


@pytest.mark.parametrize(
    ("phase", "code", "reason", "container_reason", "pod_reason"),
    [
        ("Succeeded", 0, None, "Completed", None),
        ("Failed", 1, None, "Error", None),
        ("Failed", 137, "OOMKilled", "OOMKilled", None),
        ("Failed", 137, "Evicted", "Error", "Evicted"),
    ],
    ids=["success", "error", "oomkilled", "evicted"],
)
def test_terminal_status(phase, code, reason, container_reason, pod_reason):
    status = terminal_status(pod("a", "b"), phase=phase, exit_code=code, reason=reason, restart_count=2)
    assert status["phase"] == phase
    assert [c["name"] for c in status["containerStatuses"]] == ["a", "b"]
    for cs in status["containerStatuses"]:
        assert cs["state"]["terminated"]["exitCode"] == code
        assert cs["state"]["terminated"]["reason"] == container_reason
        assert cs["restartCount"] == 2
    assert status.get("reason") == pod_reason


@pytest.mark.parametrize("kwargs", [{"phase": "Running", "exit_code": 0}, {"phase": "Failed", "exit_code": 1, "reason": "Bogus"}])
def test_terminal_status_rejects_bad_input(kwargs):
    with pytest.raises(ValueError, match="a terminal phase is Succeeded or Failed|unknown reason"):
        terminal_status(pod("a"), **kwargs)
