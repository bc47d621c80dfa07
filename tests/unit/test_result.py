"""The job's result: which replica decides, and how its termination message is read."""

from __future__ import annotations

import pytest

from airflow_t9k.api.result import message_of, parse, parse_source
from airflow_t9k.kinds.registry import get_kind
from tests.builders import colossal, generic, pytorch, training


def _ascend(framework: str, *types: str) -> dict:
    return {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob",
            "metadata": {"name": "a", "namespace": "ns", "labels": {"framework": framework}},
            "spec": {"replicaSpecs": {t: {"replicas": 1 if t != "Worker" else 2, "template": {"spec": {"containers": [
                {"name": "ascend", "image": "i"}]}}} for t in types}}}  # fmt: skip


def _kind_job(kind: str, *types: tuple[str, int]) -> dict:
    job = generic("j", *types)
    job["kind"] = kind
    return job


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (generic("j", ("worker", 2)), ("worker", 0)),
        (generic("j", ("ps", 1), ("worker", 2), successRules=[{"worker": [1, 0]}]), ("worker", 0)),
        (generic("j", ("chief", 1), ("worker", 2)), ("chief", 0)),
        (pytorch("pt"), ("master", 0)),
        (pytorch("pt", ("worker", 3)), ("worker", 0)),
        (training("TensorFlowTrainingJob", "tensorflow", "tf", ("chief", 1), ("worker", 2)), ("chief", 0)),
        (training("XGBoostTrainingJob", "xgboost", "xg", ("master", 1), ("worker", 2)), ("master", 0)),
        (colossal(), ("launcher", 0)),
        (_ascend("pytorch", "Master", "Worker"), ("Master", 0)),
        (_ascend("tensorflow", "Chief", "Worker"), ("Chief", 0)),
        (_ascend("mindspore", "Scheduler", "Worker"), ("Worker", 0)),
        (_ascend("mindspore", "Worker"), ("Worker", 0)),
    ],
    ids=["generic-default", "generic-rule", "generic-first-type", "pytorch-master", "pytorch-workers-only", "tf-chief",
         "xgb-master", "colossalai-launcher", "ascend-pytorch", "ascend-tf", "ascend-mindspore", "ascend-lone-worker"],
)  # fmt: skip
def test_decisive_replica(job, expected):
    assert get_kind(job["kind"]).decisive_replica(job) == expected


def test_beam_has_no_decisive_replica():
    job = {"kind": "BeamJob", "metadata": {"name": "b"}, "spec": {}}
    assert get_kind("BeamJob").decisive_replica(job) is None


def _pod(*containers: tuple[str, str | None]) -> dict:
    return {"status": {"containerStatuses": [
        {"name": n, "state": {"terminated": {"exitCode": 0, **({"message": m} if m is not None else {})}}} for n,
                                             m in containers]}}  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "container", "prefer", "expected"),
    [
        (_pod(("main", '{"metric": 0.93}')), None, None, '{"metric": 0.93}'),
        (_pod(("sidecar", None), ("main", "done")), None, None, "done"),
        (_pod(("a", "from a"), ("pytorch", "from pytorch")), None, "pytorch", "from pytorch"),
        (_pod(("a", "from a"), ("pytorch", None)), None, "pytorch", "from a"),
        (_pod(("a", "from a"), ("b", "from b")), "b", None, "from b"),
        (_pod(("a", "from a")), "missing", None, None),
        (_pod(("a", "")), None, None, None),
        ({"status": {"containerStatuses": [{"name": "a", "state": {"running": {}}}]}}, None, None, None),
        (None, None, None, None),
    ],
    ids=["json", "skips-empty-sidecar", "prefers-main", "falls-back", "named", "named-missing", "empty", "running", "no-pod"],
)  # fmt: skip
def test_message_of(pod, container, prefer, expected):
    assert message_of(pod, container, prefer) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [('{"metric": 0.93}', {"metric": 0.93}), ("0.93", 0.93), ("[1, 2]", [1, 2]), ("model at s3://b/m\n", "model at s3://b/m"),
     ("Traceback (most recent call last): ...", "Traceback (most recent call last): ..."), (None, None)],
)  # fmt: skip
def test_parse(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [("worker", ("worker", 0, None)), ("worker:2", ("worker", 2, None)), ("master:0/pytorch", ("master", 0, "pytorch")),
     ("launcher/main", ("launcher", 0, "main"))],
)  # fmt: skip
def test_parse_source(source, expected):
    assert parse_source(source) == expected


@pytest.mark.parametrize("bad", ["", ":1", "worker:x", "worker:-1"])
def test_parse_source_refuses_what_it_cannot_read(bad):
    with pytest.raises(ValueError, match="result_from must look like"):
        parse_source(bad)
