"""The controller cannot read Secrets: a job's SSH Secret counts as made only when the job's
status records it (name and uid), which the executor writes right after creating it."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile import CreateSSHSecret
from airflow_t9k.controller.reconcile.plan import SSH_SECRET_STATUS
from tests.builders import run
from tests.unit.controller.test_plan_mpi import mpi

CASES = [
    ("no record", {}, True),
    ("recorded", {SSH_SECRET_STATUS: {"name": "m-ssh", "uid": "s1"}}, False),
    ("a record of another name", {SSH_SECRET_STATUS: {"name": "other-ssh", "uid": "s1"}}, True),
    ("a record without a uid", {SSH_SECRET_STATUS: {"name": "m-ssh"}}, True),
    ("a record that is not a mapping", {SSH_SECRET_STATUS: "m-ssh"}, True),
]


@pytest.mark.parametrize(("status", "creates"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_secret_is_created_until_the_status_records_it(status, creates):
    p = run(mpi(), status={"phase": "Running", **status})
    assert [a.name for a in p.actions if isinstance(a, CreateSSHSecret)] == (["m-ssh"] if creates else [])
    if not creates:
        assert p.status[SSH_SECRET_STATUS] == status[SSH_SECRET_STATUS]  # the record stays across passes
