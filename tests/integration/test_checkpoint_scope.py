"""A Clear after a finished run: the program learns which re-run it is (``T9K_RERUN``) and the DAG
author chooses whether it resumes from the finished run's checkpoint (issue 28, point 9), against
the real API server and controller: the replicas' pods as the controller made them."""

from __future__ import annotations

import pytest

from tests.integration.test_operator_trigger import conn, make_op  # noqa: F401
from tests.support.task import Store, context

NFS = {"volume": {"nfs": {"server": "nas.example", "path": "/export"}}, "path": "exp"}
DONE = {"sim.t9k.test/duration": "1s"}


def _pods_see(jobs, name: str) -> set[tuple[str, str]]:
    """(T9K_RERUN, the checkpoint mount's subPath) of every container of the job's pods."""
    out = set()
    for pod in jobs.pods(name).values():
        for c in pod.spec.containers:
            env = {e.name: e.value for e in c.env or []}
            mount = next(m for m in c.volume_mounts if m.mount_path == "/t9k/checkpoint")
            out.add((env.get("T9K_RERUN"), mount.sub_path))
    return out


@pytest.mark.parametrize("scope", ["run", "try", "series"])
def test_a_clear_after_success_knows_its_rerun_and_its_checkpoint_scope(conn, jobs, controller, scope):
    store = Store()
    first = make_op(sim=DONE, deferrable=False, retries=1, checkpoint=NFS, checkpoint_scope=scope).execute(
        context(store, try_number=1, max_tries=1)
    )
    [(rerun, directory)] = _pods_see(jobs, first["name"])
    assert rerun == "0"
    # A Clear: a new series of tries (max_tries = try_number + retries), the training runs anew beside.
    again = make_op(sim=DONE, deferrable=False, retries=1, checkpoint=NFS, checkpoint_scope=scope).execute(
        context(store, try_number=2, max_tries=3)
    )
    assert again["name"] == f"{first['name']}-t2"
    [(rerun2, directory2)] = _pods_see(jobs, again["name"])
    assert rerun2 == "1"
    if scope == "run":
        assert directory2 == directory  # resumes from what the finished run left
    elif scope == "series":  # the default: the first series in the task's directory, the Clear's in its own
        assert directory2 == f"{directory}/series-2"
    else:
        assert (directory.rsplit("/", 1)[1], directory2.rsplit("/", 1)[1]) == ("try-1", "try-2")  # starts empty
