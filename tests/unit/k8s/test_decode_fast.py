"""decode() gives what json.loads gives (value, types, errors), whether msgspec or the json
fallback read it, for str and bytes."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from airflow_t9k.k8s import client
from airflow_t9k.k8s.client import decode

CASES = [
    ("big int", "123456789012345678901234567890"),
    ("negative big int", "-99999999999999999999"),
    ("int64 edges", "[9223372036854775807,-9223372036854775808,18446744073709551615,18446744073709551616]"),
    ("floats", "[0.1,1E-7,-0.0,1.7976931348623157e308,5e-324,2.4703282292062327e-324,123.456e-2,1e5]"),
    ("float too long to be exact", "1.00000000000000011102230246251565404236316680908203125"),
    ("float out of range: inf, as json.loads", "1e400"),
    ("NaN and Infinity (json.loads reads them)", "[NaN,Infinity,-Infinity]"),
    ("unicode escapes", '"\\u00e9\\u2028\\u0000\\n\\t\\"\\\\\\/"'),
    ("surrogate pair", '"\\ud83d\\ude00"'),
    ("lone surrogate (json.loads keeps it)", '"\\ud800x"'),
    ("raw UTF-8", '{"名前":"☃ é"}'),
    ("duplicate keys: the last wins", '{"a":1,"a":{"b":2},"a":3}'),
    ("empty containers", '{"a":{},"b":[],"c":"","d":null}'),
    ("literals", "[true,false,null]"),
    ("whitespace around", ' \n\t{"a" : [ 1 , 2 ] }\r\n '),
    ("nesting past msgspec's limit (fallback)", '{"a":' * 3000 + "1" + "}" * 3000),
    (
        "a pod's worth",
        json.dumps(
            {
                "metadata": {"name": "p", "labels": {"a": "b"}, "resourceVersion": "12"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 0.5}}}]},
                "status": {"phase": "Running"},
            }
        ),
    ),
]


def same(a: object, b: object) -> bool:
    """Equal, with the same types all the way down (1 is not 1.0; NaN is NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)  # type: ignore[index,call-overload]
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    return a == b


@pytest.mark.parametrize("raw", [c[1] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_decode_is_json_loads(raw, as_bytes):
    data = raw.encode("utf-8", "surrogatepass") if as_bytes else raw
    limit = sys.getrecursionlimit()
    got = decode(data)
    assert sys.getrecursionlimit() == limit
    sys.setrecursionlimit(client.DEEP_NESTING)  # json.loads and same() need it for the deep case
    try:
        assert same(got, json.loads(raw))
    finally:
        sys.setrecursionlimit(limit)


ERRORS = [
    ("trailing comma", "[1,]"),
    ("truncated", '{"a":'),
    ("two documents", "{} {}"),
    ("an int too long for Python", "1" * 5000),
    ("empty", " "),
]


@pytest.mark.parametrize("raw", [c[1] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_are_json_loads_errors(raw):
    with pytest.raises(ValueError) as expected:  # noqa: PT011 - whichever json.loads raises; compared below
        json.loads(raw)
    with pytest.raises(type(expected.value)) as got:
        decode(raw)
    assert str(got.value) == str(expected.value)


def test_msgspec_reads_the_common_case():
    """The fast path is taken (not silently json.loads every time)."""
    assert client._fast_decode is not json.loads
    assert client._fast_decode(b'{"a":[1,2.5,"x"]}') == {"a": [1, 2.5, "x"]}


DEEP_CRASH = """
import sys
from airflow_t9k.k8s.client import DEEP_NESTING, Undecodable, decode
sys.setrecursionlimit(DEEP_NESTING)  # as the controller runs
for depth in (2_500, 30_000, 200_000):
    for raw in ('{"a":' * depth + "1" + "}" * depth, "[" * depth + "]" * depth):
        for data in (raw, raw.encode()):
            try:
                decode(data)
                print("decoded", depth)
            except Undecodable:
                print("undecodable", depth)
"""


def test_deep_input_under_the_controllers_recursion_limit_never_crashes():
    """msgspec would overflow the C stack here (a segfault, not an exception): a subprocess,
    so that a crash fails this test instead of ending the test run."""
    out = subprocess.run([sys.executable, "-c", DEEP_CRASH], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:4] == ["decoded 2500"] * 4
    assert out.stdout.count("undecodable 200000") == 4


@pytest.mark.parametrize(("limit", "raw", "fast"), [
    (25_000, "[" * 2_001 + "]" * 2_001, False),  # could be deep: json.loads, which is safe at any depth
    (25_000, "[" * 2_000 + "]" * 2_000, True),
    (25_000, json.dumps([{"a": [1]}] * 1_500), False),  # a long list: safe, but the count cannot tell
    (1_000, json.dumps([{"a": [1]}] * 1_500), True),  # a low limit makes msgspec stop itself in time
])  # fmt: skip
def test_msgspec_gets_only_what_cannot_nest_too_deep(monkeypatch, limit, raw, fast):
    calls = []
    real = client._fast_decode
    monkeypatch.setattr(client, "_fast_decode", lambda r: calls.append(1) or real(r))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        client.decode(raw)
    except client.Undecodable:
        pass
    finally:
        sys.setrecursionlimit(old)
    assert bool(calls) == fast
