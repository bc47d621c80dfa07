"""Step "children" alone: SSH Secret, extra objects, one Service per replica."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.steps import children
from tests.builders import colossal, generic, service
from tests.unit.controller.steps.state import kinds, state


@pytest.mark.parametrize(
    ("job", "objects", "status", "actions"),
    [
        (generic(), (), None, [("Create", "Service", "job-worker-0"), ("Create", "Service", "job-worker-1")]),
        # A Service no replica wants (replicas lowered) goes.
        (generic("job", ("worker", 1)), (service("job-worker-0"), service("job-worker-1")), None,
         [("Delete", "Service", "job-worker-1")]),
        (colossal(workers=1), (), None, [("CreateSSHSecret", "Secret", "cai-ssh"), ("Create", "ConfigMap", "cai-hostfile"),
                                         ("Create", "Service", "cai-worker-0")]),
        # The Secret is recorded in status once made: never created twice.
        (colossal(workers=1), (service("cai-worker-0"),), {"sshSecret": {"name": "cai-ssh", "uid": "s"}},
         [("Create", "ConfigMap", "cai-hostfile")]),
    ],
)  # fmt: skip
def test_children(job, objects, status, actions):
    p = children.children(state(job, *objects, status=status))
    assert kinds(p) == actions
    assert p.children == p.actions
    assert not p.ended


def test_a_changed_hostfile_is_patched():
    hostfile = {"kind": "ConfigMap", "metadata": {"name": "cai-hostfile", "uid": "c"}, "data": {"hostfile": "old"}}
    p = children.children(
        state(colossal(workers=1), hostfile, service("cai-worker-0"), status={"sshSecret": {"name": "cai-ssh", "uid": "s"}})
    )
    assert kinds(p) == [("Patch", "ConfigMap", "cai-hostfile")]
