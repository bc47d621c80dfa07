"""Every YAML block the specification prints (examples/manifests/seeds/, as printed): a whole
job is accepted and behaves as its seed says; an excerpt is refused with a message naming the
fix, and once completed with its seed's whole example it behaves as the seed says."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from airflow_t9k.api.excerpt import _unelide
from airflow_t9k.cli import check_text
from airflow_t9k.controller.reconcile import Create
from tests.builders import cond, pod, run, service

SEEDS = Path(__file__).resolve().parents[2] / "examples" / "manifests" / "seeds"
STATUS = "it shows a job's status, which the controller writes"
EXCERPT = "it is an excerpt (it shows only {}; '...' stands for the rest of the job): add these fields to a whole job"
CONTAINER = (
    "has no name or image (the example shows only the fields it is about): give each container its name, image and command"
)

REFUSED = {
    "seed001-02.yaml": CONTAINER, "seed001-03.yaml": CONTAINER, "seed001-04.yaml": CONTAINER,
    "seed001-06.yaml": EXCERPT.format("spec.successRules, spec.failureRules"),
    "seed001-07.yaml": "it is an excerpt of a GenericJob ('...' stands for what it leaves out): fill in the rest",
    "seed001-08.yaml": EXCERPT.format("spec.scheduler"), "seed001-09.yaml": EXCERPT.format("spec.runMode"),
    "seed001-10.yaml": EXCERPT.format("spec.runMode"), "seed001-11.yaml": STATUS, "seed001-12.yaml": STATUS,
    "seed001-13.yaml": STATUS, "seed003-02.yaml": CONTAINER, "seed003-03.yaml": CONTAINER, "seed003-04.yaml": CONTAINER,
    "seed003-05.yaml": EXCERPT.format("spec.runPolicy"), "seed003-06.yaml": EXCERPT.format("spec.scheduler"),
    "seed003-07.yaml": EXCERPT.format("spec.runMode"), "seed003-08.yaml": EXCERPT.format("spec.runMode"),
    "seed003-09.yaml": STATUS, "seed003-10.yaml": STATUS, "seed003-11.yaml": STATUS,
}  # fmt: skip
WHOLE = ("seed001-01.yaml", "seed001-05.yaml", "seed002-01.yaml", "seed003-01.yaml")


def text(name: str) -> str:
    return (SEEDS / name).read_text()


def job(name: str, doc: int = 0) -> dict:
    clean, _ = _unelide(text(name))
    out = [d for d in yaml.safe_load_all(clean) if d is not None][doc]
    out.setdefault("metadata", {}).update(namespace="ns", uid="uid-1")
    return out


def completed(excerpt: str, whole: str, doc: int = 0) -> dict:
    """The excerpt's spec merged into its seed's whole example."""
    out = job(whole)
    out["spec"].update(copy.deepcopy(job(excerpt, doc)["spec"]))
    return out


def pods(p) -> dict[str, dict]:
    return {a.name: a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod"}


def test_every_printed_block_is_here_and_classified():
    assert sorted(p.name for p in SEEDS.glob("*.yaml")) == sorted([*REFUSED, *WHOLE])


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_an_excerpt_is_refused_naming_the_fix(name):
    found = check_text(text(name))
    assert found, found
    assert all(REFUSED[name] in line for line in found), found


@pytest.mark.parametrize("name", WHOLE)
def test_a_whole_example_is_accepted_and_starts(name):
    assert check_text(text(name)) == []
    first = run(job(name))
    assert first.status.get("phase") != "Failed"
    assert first.creates()


def test_seed001_generic_example_worker_0_decides():
    example = job("seed001-01.yaml")
    names = [f"generic-example-worker-{i}" for i in range(4)]
    assert sorted(pods(run(example))) == names
    objs = [service(n) for n in names]
    done = run(example, pod(names[0], "Succeeded", 0), *(pod(n) for n in names[1:]), *objs, status={"phase": "Running"})
    assert done.status["phase"] == "Succeeded"
    failed = run(
        example, pod(names[0]), pod(names[1], "Failed", 1), *(pod(n) for n in names[2:]), *objs, status={"phase": "Running"}
    )
    assert cond(failed, "Failed")["message"] == 'The job is failed with rule: { "worker": [1] }'


def test_seed001_tf_config_as_printed():
    env = pods(run(job("seed001-05.yaml")))["generic-example-worker-1"]["spec"]["containers"][0]["env"][0]["value"]
    assert env.startswith('{"task":{"type":"worker","index":1},"cluster":{"worker":["generic-example-worker-0:2222"')


def test_seed002_ascendjob_starts_with_its_leader_service_and_rank_table():
    first = run(job("seed002-01.yaml"))
    assert first.creates("Service") == ["default-test-pytorch-master-0"]
    assert first.creates("ConfigMap") == ["rings-config-default-test-pytorch"]


def test_seed003_colossalai_launcher_and_two_workers():
    created = pods(run(job("seed003-01.yaml")))
    assert sorted(created) == ["colossalai-example-launcher", "colossalai-example-worker-0", "colossalai-example-worker-1"]


def test_excerpts_completed_with_their_seeds_example_behave_as_the_seeds_say():
    # seed 001 scheduler: queue default, priority 50 on the replicas
    labelled = pods(run(completed("seed001-08.yaml", "seed001-01.yaml")))["generic-example-worker-0"]["metadata"]
    assert labelled["labels"]["scheduler.tensorstack.dev/queue"] == "default"
    assert labelled["annotations"]["scheduler.tensorstack.dev/priority"] == "50"
    # seed 001 debug, example one: the worker runs sshd and skips its init containers
    debug = pods(run(completed("seed001-09.yaml", "seed001-01.yaml")))["generic-example-worker-0"]["spec"]["containers"][0]
    assert debug["command"] == ["/usr/bin/sshd"]
    # seed 001 pause: no replica runs
    paused = run(completed("seed001-10.yaml", "seed001-01.yaml"))
    assert paused.status["phase"] == "Paused"
    assert pods(paused) == {}
    # seed 001 service: the port is exposed on every replica's Service
    exposed = job("seed001-07.yaml")
    exposed["spec"]["replicaSpecs"][0]["template"] = job("seed001-01.yaml")["spec"]["replicaSpecs"][0]["template"]
    svc = next(a.manifest for a in run(exposed).actions if isinstance(a, Create) and a.kind == "Service")
    assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("http", 2222)]
    # seed 003 scheduler: only the workers are in the queue
    queued = pods(run(completed("seed003-06.yaml", "seed003-01.yaml")))
    assert "scheduler.tensorstack.dev/queue" in queued["colossalai-example-worker-0"]["metadata"]["labels"]
    assert "scheduler.tensorstack.dev/queue" not in queued["colossalai-example-launcher"]["metadata"]["labels"]
