"""Variable substitution: exactly our five forms are expanded; the shell's and Kubernetes' are left alone."""

from __future__ import annotations

import time

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
        # Shell arithmetic and command substitution around or beside ours (fidelity issue, item 5).
        ("$(($(rank)+1))", "$((1+1))"),
        ("echo $(( $(rank) * $(replicas[worker]) ))", "echo $(( 1 * 4 ))"),
        ("$(type -P python3)", "$(type -P python3)"),
        ("$(service nginx status)", "$(service nginx status)"),
        ("$(rank", "$(rank"),
        ("$(type.x)", "$(type.x)"),
        ("$(service.worker.host)", "$(service.worker.host)"),
        ("x=$(cat $(type).txt)", "x=$(cat worker.txt)"),
        ("$(replicas[$(type)])", "$(replicas[worker])"),
    ],
    ids=["type", "rank", "replicas", "host-port", "spaces", "k8s-env", "escape", "plain", "identifier-prefix",
         "arithmetic", "arithmetic-spaced", "type-command", "service-command", "unterminated", "type-dot", "no-rank",
         "nested-command", "inner-first"],
)  # fmt: skip
def test_substitute(text, expected):
    assert substitute(text, CTX, "here") == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("$(replicas[chief])", "names replica type 'chief'"),
        ("$(service.worker[4].host)", "names rank 4, but worker has 4"),
        ("$(service.chief[0].host)", "names replica type 'chief'"),
        ("$(service.port[grpc])", "names port 'grpc', but spec.service.ports has http"),
    ],
)
def test_our_forms_naming_what_does_not_exist_are_errors(text, needle):
    with pytest.raises(InvalidSpec, match="here") as err:
        substitute(text, CTX, "here")
    assert needle in str(err.value)


def test_hosts_resolve_without_spec_service_ports_but_ports_do_not():
    ctx = Context("job", "worker", 0, {"worker": 2}, {})
    assert substitute("$(service.worker[1].host)", ctx, "here") == "job-worker-1"
    with pytest.raises(InvalidSpec, match="spec.service.ports declares none"):
        substitute("$(service.port[http])", ctx, "here")


@pytest.mark.parametrize(
    "text",
    ["$(rank" * 20_000, "$(service.worker" * 8_000, "$(replicas[" * 10_000, "x" * 112_000 + "$(rank", "$(" * 56_000],
    ids=["unterminated-rank", "unterminated-service", "unterminated-replicas", "long-value", "openers"],
)
def test_large_values_take_linear_time(text):
    # A 112 KB env value once froze the controller for 17 s (the old unterminated check was quadratic).
    start = time.perf_counter()
    assert substitute(text, CTX, "here") == text
    assert time.perf_counter() - start < 0.5
