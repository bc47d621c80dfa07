"""Step "render" alone: every pod to create, rendered at once, or the job fails before any exists."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.steps import render
from tests.builders import generic, pod
from tests.unit.controller.steps.state import condition, state


def _with_command(*command: str) -> dict:
    job = generic()
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"] = list(command)
    return job


@pytest.mark.parametrize(
    ("job", "pods", "rendered", "failed"),
    [
        (generic(), (), ["job-worker-0", "job-worker-1"], False),
        (generic(), (pod("job-worker-0"),), ["job-worker-1"], False),  # only what is missing
        (generic(), (pod("job-worker-0"), pod("job-worker-1")), [], False),
        (_with_command("echo", "$(service.worker[0].host)"), (), ["job-worker-0", "job-worker-1"], False),
        (_with_command("echo", "$(service.worker[5].host)"), (), [], True),  # no such rank: fails, nothing made
    ],
)
def test_render(job, pods, rendered, failed):
    p = render.render(state(job, *pods))
    assert sorted(p.rendered) == rendered
    assert p.ended is failed
    if failed:
        assert condition(p, "Failed") == ("True", "InvalidSpec")
    else:
        assert p.rendered.get("job-worker-0", {}).get("metadata", {}).get("name") in (None, "job-worker-0")


def test_render_after_a_pause_uses_resume_specs():
    job = generic(runMode={"pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "command": ["resumed"]}]}})
    paused = {"phase": "Resuming", "conditions": [{"type": "Paused", "status": "False", "reason": "Resumed", "message": "m"}]}
    fresh, resumed = render.render(state(job)), render.render(state(job, status=paused))
    assert fresh.rendered["job-worker-0"]["spec"]["containers"][0]["command"] == ["train"]
    assert resumed.rendered["job-worker-0"]["spec"]["containers"][0]["command"] == ["resumed"]
