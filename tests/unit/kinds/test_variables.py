"""Variable substitution: ours are expanded, Kubernetes' are left alone, bad ones are errors."""

from __future__ import annotations

import pytest

from airflow_t9k.kinds.base import InvalidSpec
from airflow_t9k.kinds.variables import Context, substitute

CTX = Context("job", "worker", 1, {"worker": 4, "ps": 1}, {"http": 2222})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(type)", "worker"),
        ("$(rank)", "1"),
        ("$(replicas[worker])/$(replicas[ps])", "4/1"),
        ("$(service.ps[0].host):$(service.port[http])", "job-ps-0:2222"),
        ("$( rank )", "1"),
        ("$(HOME)/x", "$(HOME)/x"),
        ("$$(type)", "$$(type)"),
        ("no variables", "no variables"),
        ("$(typed)", "$(typed)"),
    ],
    ids=["type", "rank", "replicas", "host-port", "spaces", "k8s-env", "escape", "plain", "identifier-prefix"],
)
def test_substitute(text, expected):
    assert substitute(text, CTX, "here") == expected


@pytest.mark.parametrize(
    "text",
    ["$(replicas[chief])", "$(service.worker[4].host)", "$(service.port[grpc])", "$(service.worker.host)", "$(rank", "$(type.x)"],
)
def test_substitute_rejects(text):
    with pytest.raises(InvalidSpec, match="here"):
        substitute(text, CTX, "here")


def test_service_variables_need_spec_service():
    ctx = Context("job", "worker", 0, {"worker": 1}, None)
    with pytest.raises(InvalidSpec, match="needs spec.service"):
        substitute("$(service.port[http])", ctx, "here")
