"""Pod templates in every CRD carry the Pod template's own schema (scripts/gen_podtemplate_schema.py):
the API server refuses malformed templates with its own message, prunes what a template cannot
hold (so nothing nests without bound), and still admits every job the project ships."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.builders import colossal, pytorch, training
from tests.support.manifests import MANIFESTS, manifest

ROOT = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]


def _named(job: Obj, name: str) -> Obj:
    job = copy.deepcopy(job)
    job["metadata"] = {"name": name}
    return job


def beam() -> Obj:
    container = {"name": "submit", "image": "beam", "command": ["python3", "-m", "wordcount"]}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "BeamJob", "metadata": {"name": "bj"},
            "spec": {"flinkClusterTemplate": {"spec": {"image": {"name": "flink"}}},
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": [container],
                                                                    "restartPolicy": "OnFailure"}}}}}}  # fmt: skip


# kind -> (a valid job, its first pod template, the template's field path in the API server's messages)
KINDS: dict[str, tuple[Callable[[], Obj], Callable[[Obj], Obj], str]] = {
    "GenericJob": (lambda: manifest("genericjob-example"), lambda j: j["spec"]["replicaSpecs"][0]["template"],
                   "spec.replicaSpecs[0].template"),
    "PyTorchTrainingJob": (lambda: pytorch(), lambda j: j["spec"]["replicaSpecs"][0]["template"],
                           "spec.replicaSpecs[0].template"),
    "AscendJob": (lambda: manifest("ascendjob-pytorch"), lambda j: j["spec"]["replicaSpecs"]["Master"]["template"],
                  "spec.replicaSpecs.Master.template"),
    "BeamJob": (beam, lambda j: j["spec"]["jobTemplate"]["spec"]["template"], "spec.jobTemplate.spec.template"),
    "ColossalAIJob": (lambda: colossal(), lambda j: j["spec"]["worker"]["template"], "spec.worker.template"),
}  # fmt: skip


def _env_string(t: Obj) -> None:
    t["spec"]["containers"][0]["env"] = "A=1"


def _labels_list(t: Obj) -> None:
    t.setdefault("metadata", {})["labels"] = ["a", "b"]


def _command_string(t: Obj) -> None:
    t["spec"]["containers"][0]["command"] = "python train.py"


def _init_containers_string(t: Obj) -> None:
    t["spec"]["initContainers"] = "setup"


# (case, how to break the template, the field, what the API server says about it)
MALFORMED = [
    ("env-string", _env_string, "spec.containers[0].env", "must be of type array"),
    ("labels-list", _labels_list, "metadata.labels", "must be of type object"),
    ("command-string", _command_string, "spec.containers[0].command", "must be of type array"),
    ("init-containers-string", _init_containers_string, "spec.initContainers", "must be of type array"),
]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("case", "breaks", "field", "says"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_template_is_refused_with_the_api_servers_message(jobs, kind, case, breaks, field, says):
    make, template_of, prefix = KINDS[kind]
    job = _named(make(), f"bad-{case}")
    breaks(template_of(job))
    message = jobs.rejected(job)
    assert f"{prefix}.{field} in body {says}" in message, message


def _deep(levels: int) -> Obj:
    value: Obj = {}
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.fixture
def deep_recursion():
    # 3,000 levels need more Python frames than the default 1,000 to serialise the request.
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    yield
    sys.setrecursionlimit(saved)


@pytest.mark.parametrize("kind", ["GenericJob", "AscendJob", "BeamJob"])
def test_3000_deep_nesting_in_a_template_is_pruned(jobs, deep_recursion, kind):
    """With the default field validation (Warn, as client libraries send) unknown fields in a
    template are dropped at admission: the stored job is shallow, whatever was sent."""
    make, template_of, _ = KINDS[kind]
    job = _named(make(), "deep")
    template = template_of(job)
    template["spec"]["hostile"] = _deep(3000)
    template.setdefault("metadata", {})["hostile"] = _deep(3000)
    template["spec"]["containers"][0]["hostile"] = _deep(3000)
    jobs.create(job)
    stored = template_of(jobs.get(kind, "deep"))
    assert "hostile" not in stored["spec"]
    assert "hostile" not in stored["metadata"]
    assert "hostile" not in stored["spec"]["containers"][0]
    assert stored["spec"]["containers"][0]["image"] == template["spec"]["containers"][0]["image"]


def test_3000_deep_nesting_is_refused_under_strict_field_validation(jobs, deep_recursion):
    """kubectl validates strictly by default: there the same job is refused, naming the field."""
    job = _named(manifest("genericjob-example"), "deep-strict")
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["hostile"] = _deep(3000)
    with pytest.raises(ApiException) as err:
        jobs.api.create_namespaced_custom_object(*jobs._r("GenericJob"), job, field_validation="Strict")
    message = json.loads(err.value.body)["message"]
    assert err.value.status == 400, message
    assert 'unknown field "spec.replicaSpecs[0].template.spec.hostile"' in message, message


def test_deep_value_in_a_typed_template_field_is_refused(jobs, deep_recursion):
    job = _named(manifest("genericjob-example"), "deep-label")
    job["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"labels": {"a": _deep(3000)}}
    assert "spec.replicaSpecs[0].template.metadata.labels.a in body must be of type string" in jobs.rejected(job)


# -- what the project ships is admitted unchanged ---------------------------------------------------


def _subset(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Where ``stored`` lost or changed something of ``sent`` (defaults the API server adds are fine)."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path]
        return [
            p
            for k, v in sent.items()
            for p in ([f"{path}.{k} pruned"] if k not in stored else _subset(v, stored[k], f"{path}.{k}"))
        ]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(sent) != len(stored):
            return [path]
        return [p for i, (a, b) in enumerate(zip(sent, stored, strict=True)) for p in _subset(a, b, f"{path}[{i}]")]
    return [] if sent == stored else [f"{path}: {sent!r} became {stored!r}"]


def _dag_jobs() -> list[tuple[str, Obj]]:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_t9k.operators.dryrun import dry_run_context
    from airflow_t9k.operators.job import T9kJobOperator

    out = []
    bag = DagBag(dag_folder=str(ROOT / "dags_examples"), safe_mode=False)
    assert not bag.import_errors, bag.import_errors
    for dag_id, dag in sorted(bag.dags.items()):
        for task in dag.tasks:
            if isinstance(task, T9kJobOperator):
                op = copy.deepcopy(task)
                op.namespace = "placeholder"
                op.resolve_template_files()
                op.render_template_fields(dry_run_context(op))
                out.append((f"{dag_id}.{task.task_id}", op.rendered_job))
    return out


def _shipped_jobs() -> list[tuple[str, Obj]]:
    out = [(p.stem, manifest(p.stem)) for p in sorted(MANIFESTS.glob("*.yaml"))]
    out += [("builders.pytorch", pytorch()), ("builders.colossal", colossal()), ("beam", beam())]
    out += [
        ("builders.tensorflow", training("TensorFlowTrainingJob", "tensorflow", "tf", ("chief", 1), ("worker", 2))),
        ("builders.xgboost", training("XGBoostTrainingJob", "xgboost", "xgb")),
    ]
    return out + _dag_jobs()


def test_every_shipped_job_is_admitted_without_losing_a_field(jobs):
    """Server-side dry run (admission, defaulting and pruning, nothing stored) of the example
    manifests, the test builders and the job of every example DAG."""
    shipped = _shipped_jobs()
    assert {j["kind"] for _, j in shipped} >= {"GenericJob", "PyTorchTrainingJob", "TensorFlowTrainingJob", "XGBoostTrainingJob",
                                                "ColossalAIJob", "DeepSpeedJob", "MPIJob", "BeamJob", "AscendJob"}  # fmt: skip
    problems = {}
    for name, example in shipped:
        job = copy.deepcopy(example)
        job["metadata"] = {"name": "dry-run", "labels": job["metadata"].get("labels") or {}}
        try:
            stored = jobs.api.create_namespaced_custom_object(*jobs._r(job["kind"]), job, dry_run="All")
        except ApiException as exc:
            problems[name] = exc.body
            continue
        if lost := _subset(job["spec"], stored["spec"], "spec"):
            problems[name] = lost
    assert problems == {}


def test_committed_schema_is_what_the_script_makes_from_this_api_server(cluster):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_podtemplate_schema.py"), "--check", "--kubeconfig", str(cluster.kubeconfig)],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
