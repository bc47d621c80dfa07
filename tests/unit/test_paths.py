"""REST paths: one builder for the controller, the hooks and the trigger."""

from __future__ import annotations

import pytest

from airflow_t9k.api.paths import child_path, job_path
from airflow_t9k.api.resources import RESOURCES, resource_for


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ((None, None, None), "/apis/batch.tensorstack.dev/v1beta1/mpijobs"),
        (("ns", None, None), "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/mpijobs"),
        (("ns", "j", "status"), "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/mpijobs/j/status"),
    ],
)
def test_job_path(args, path):
    assert job_path(RESOURCES["MPIJob"], *args) == path


def test_core_path():
    assert child_path("Pod", "ns", "p", "log") == "/api/v1/namespaces/ns/pods/p/log"
    assert child_path("Event") == "/api/v1/events"
    assert child_path("Job", "ns", "b") == "/apis/batch/v1/namespaces/ns/jobs/b"


def test_every_kind_has_an_explicit_plural_and_unknown_kinds_are_named():
    assert {r.plural for r in RESOURCES.values()} == {
        "genericjobs", "pytorchtrainingjobs", "tensorflowtrainingjobs", "xgboosttrainingjobs",
        "colossalaijobs", "deepspeedjobs", "mpijobs", "beamjobs", "ascendjobs"}  # fmt: skip
    with pytest.raises(KeyError, match="unknown job kind 'TFJob'"):
        resource_for("TFJob")
