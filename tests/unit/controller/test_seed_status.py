"""Our conditions against the status examples seeds 001 and 003 print (examples/manifests/seeds/):
the same types, and in the states the examples show, the same status, reason and message."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from airflow_t9k.api.excerpt import _unelide
from airflow_t9k.controller.reconcile import Create, Observed, plan
from tests.builders import NOW, pod

SEEDS = Path(__file__).resolve().parents[3] / "examples" / "manifests" / "seeds"


def printed(name: str) -> list[dict]:
    clean, _ = _unelide((SEEDS / name).read_text())
    return next(d for d in yaml.safe_load_all(clean) if d)["status"]["conditions"]


def whole(name: str) -> dict:
    clean, _ = _unelide((SEEDS / name).read_text())
    job = next(d for d in yaml.safe_load_all(clean) if d)
    job["metadata"].update(namespace="ns", uid="uid-1", generation=1)
    return job


def settled(job: dict, *pods: dict, status: dict | None = None) -> dict:
    """The status after the controller's passes: its children observed, each status fed back."""
    objects: list[dict] = []
    status = copy.deepcopy(status)
    for _ in range(3):
        p = plan({**job, "status": status} if status else job, Observed.of(*pods, *objects), NOW)
        objects += [{**a.manifest, "metadata": {**a.manifest["metadata"], "uid": f"u-{a.name}"}}
                    for a in p.actions if isinstance(a, Create) and a.kind != "Pod"]  # fmt: skip
        status = p.status
        if job["kind"] == "ColossalAIJob":
            status["sshSecret"] = {"name": f"{job['metadata']['name']}-ssh", "uid": "s"}
    return status


def generic_pods(*phases: tuple[str, int | None]) -> list[dict]:
    return [pod(f"generic-example-worker-{i}", ph, code) for i, (ph, code) in enumerate(phases)]


RUNNING = (("Running", None),) * 4
COLOSSAL = [pod("colossalai-example-launcher", rtype="launcher"), pod("colossalai-example-worker-0"),
            pod("colossalai-example-worker-1")]  # fmt: skip


def _generic(*phases: tuple[str, int | None], status: dict | None = None) -> dict:
    return settled(whole("seed001-01.yaml"), *generic_pods(*phases), status=status)


def _colossal(launcher: str, code: int | None, status: dict | None = None) -> dict:
    pods = [pod("colossalai-example-launcher", launcher, code, rtype="launcher"), *COLOSSAL[1:]]
    return settled(whole("seed003-01.yaml"), *pods, status=status)


def _running(kind: str) -> dict:
    return _generic(*RUNNING) if kind == "generic" else _colossal("Running", None)


def _failed(kind: str) -> dict:
    if kind == "generic":
        return _generic(("Failed", 1), *RUNNING[1:], status=_running(kind))
    return _colossal("Failed", 1, status=_running(kind))


# (seed file, the kind run, condition type, the state of ours compared with the printed one)
CASES = [
    ("seed001-11.yaml", "generic", "Initializing", _running),
    ("seed001-11.yaml", "generic", "Running", _running),
    ("seed001-11.yaml", "generic", "ReplicaFailure", _running),
    ("seed001-11.yaml", "generic", "Completed", _failed),
    ("seed001-11.yaml", "generic", "Failed", _failed),
    ("seed003-09.yaml", "colossal", "Initializing", _running),
    ("seed003-09.yaml", "colossal", "Running", _running),
    ("seed003-09.yaml", "colossal", "ReplicaFailure", _running),
    ("seed003-09.yaml", "colossal", "Completed", _failed),
    ("seed003-09.yaml", "colossal", "Failed", _failed),
]


@pytest.mark.parametrize(("seed", "kind", "type_", "state"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_condition_as_the_seed_prints_it(seed, kind, type_, state):
    theirs = next(c for c in printed(seed) if c["type"] == type_)
    ours = next(c for c in state(kind)["conditions"] if c["type"] == type_)
    assert (ours["status"], ours["reason"], ours["message"]) == (theirs["status"], theirs["reason"], theirs["message"])


@pytest.mark.parametrize(("seed", "kind"), [("seed001-11.yaml", "generic"), ("seed003-09.yaml", "colossal")])
def test_the_same_condition_types(seed, kind):
    assert {c["type"] for c in _failed(kind)["conditions"]} == {c["type"] for c in printed(seed)}


@pytest.mark.parametrize("kind", ["generic", "colossal"])
def test_after_the_end_running_and_replica_failure_say_what_happened(kind):
    # The printed failed job keeps Running True and ReplicaFailure False (docs/design.md says why ours differ).
    conditions = {c["type"]: c for c in _failed(kind)["conditions"]}
    assert (conditions["Running"]["status"], conditions["Running"]["reason"]) == ("False", "Failed")
    assert (conditions["ReplicaFailure"]["status"], conditions["ReplicaFailure"]["reason"]) == ("True", "ReplicaFailed")


def test_a_condition_written_by_an_earlier_version_is_renamed_in_place():
    old = _running("generic")
    for c in old["conditions"]:
        if c["type"] == "Initializing":
            c.update(type="Initialized", reason="Initialized", lastTransitionTime="2026-11-25T10:00:00Z")
    job = {**whole("seed001-01.yaml"), "status": old}
    new = plan(job, Observed.of(*generic_pods(*RUNNING)), NOW).status
    assert [c["type"] for c in new["conditions"]] == [c["type"] if c["type"] != "Initialized" else "Initializing"
                                                      for c in old["conditions"]]  # fmt: skip
    renamed = next(c for c in new["conditions"] if c["type"] == "Initializing")
    assert (renamed["status"], renamed["reason"], renamed["lastTransitionTime"]) == ("True", "-", "2026-11-25T10:00:00Z")
