"""Pure parts of issue 23's evidence and attempts: which job each try ran (api/attempts.py),
which evidence record a task trusts (api/evidence.py) and an earlier try's row in the tab
(ui/attempts.py)."""

from __future__ import annotations

import logging

import pytest

from airflow_t9k.api.attempts import MAX_ATTEMPTS, parse, record
from airflow_t9k.api.evidence import KeptLogs, kept_logs, last_lines

ID = {"kind": "GenericJob", "namespace": "ns", "name": "train-1", "uid": "u1", "server": "https://k8s"}


def entry(n: int, uid: str = "u1", name: str = "train-1") -> dict:
    return {"try": n, "kind": "GenericJob", "namespace": "ns", "name": name, "uid": uid}


RECORD_CASES = [
    ("the first try", None, 1, ID, [entry(1)]),
    ("a retry appends", [entry(1)], 2, {**ID, "name": "train-1-t2", "uid": "u2"}, [entry(1), entry(2, "u2", "train-1-t2")]),
    ("the same try again replaces its entry", [entry(1), entry(2)], 2, {**ID, "uid": "u9"}, [entry(1), entry(2, "u9")]),
    ("garbage in the store is dropped", ["x", {"try": "1"}, {"try": True, **ID}, entry(1)], 3, ID, [entry(1), entry(3)]),
    ("not a list", {"try": 1}, 1, ID, [entry(1)]),
    (
        "bounded, the latest kept",
        [entry(n) for n in range(1, MAX_ATTEMPTS + 1)],
        MAX_ATTEMPTS + 1,
        ID,
        [entry(n) for n in range(2, MAX_ATTEMPTS + 2)],
    ),
]


@pytest.mark.parametrize(("history", "try_number", "identity", "expected"), [c[1:] for c in RECORD_CASES],
                         ids=[c[0] for c in RECORD_CASES])  # fmt: skip
def test_record(history, try_number, identity, expected):
    assert record(history, try_number, identity) == expected
    assert parse(expected) == expected


JOB = {"metadata": {"name": "train-1", "uid": "u1"}, "status": {"created": {"ConfigMap": {"train-1-evidence": {"uid": "cm1"}}}}}
CONTROLLER = {"uid": "u1", "controller": True, "kind": "GenericJob", "name": "train-1"}
DATA = {"train-1-worker-0.log": "a\nb\n", "summary.json": "{}", "events.json": "[]"}
MADE = {"name": "train-1-evidence", "uid": "cm1", "ownerReferences": [CONTROLLER]}
EVIDENCE_CASES = [
    ("the controller's record", {"metadata": MADE, "data": DATA}, {"train-1-worker-0": "a\nb\n"}),
    ("none", None, {}),
    # Issue 29, 8: a pre-made one with the job's controller reference (a uid is no secret) is not trusted.
    ("pre-made, the job's reference forged", {"metadata": {**MADE, "uid": "forged"}, "data": DATA}, {}),
    ("no owner, the recorded uid", {"metadata": {"name": "train-1-evidence", "uid": "cm1"}, "data": DATA},
     {"train-1-worker-0": "a\nb\n"}),
    ("another name", {"metadata": {**MADE, "name": "x-evidence"}, "data": DATA}, {}),
    ("a log that is not text is dropped", {"metadata": MADE, "data": {"p.log": 3}}, {}),
]  # fmt: skip


def test_kept_logs_needs_the_record_in_the_jobs_status():
    assert kept_logs({"metadata": MADE, "data": DATA}, {**JOB, "status": {}}) == {}


@pytest.mark.parametrize(("configmap", "expected"), [c[1:] for c in EVIDENCE_CASES], ids=[c[0] for c in EVIDENCE_CASES])
def test_kept_logs_trusts_only_the_jobs_own_record(configmap, expected):
    assert kept_logs(configmap, JOB) == expected


@pytest.mark.parametrize(("text", "lines", "expected"), [("a\nb\nc\n", 2, "b\nc\n"), ("a\nb", None, "a\nb"),
                                                         ("a\n", 0, ""), ("", 5, "")])  # fmt: skip
def test_last_lines(text, lines, expected):
    assert last_lines(text, lines) == expected


def test_kept_logs_reads_the_record_once_and_says_when_it_is_forged(caplog):
    calls = []
    forged = {"metadata": {**MADE, "uid": "forged"}, "data": DATA}
    kept = KeptLogs(JOB, logging.getLogger("t"))
    with caplog.at_level(logging.WARNING):
        for pod in ("train-1-worker-0", "train-1-worker-1"):
            text, source = kept.instead(pod, "(log not available: gone)", lambda: calls.append(1) or forged)
            assert (text, source) == ("(log not available: gone)", None)
    assert len(calls) == 1
    assert "is not this job's evidence record" in caplog.text
    ok = KeptLogs(JOB, logging.getLogger("t"))
    good = {"metadata": MADE, "data": DATA}
    assert ok.instead("train-1-worker-0", "", lambda: good) == ("a\nb\n", "train-1-evidence")
    assert ok.instead("train-1-worker-1", "", lambda: good)[1] is None


def test_an_earlier_try_row():
    from airflow_t9k.ui.attempts import row

    earlier = {
        "try": 1,
        "state": "failed",
        "started": None,
        "ended": None,
        "job": {k: ID[k] for k in ("kind", "namespace", "name", "uid")},
    }
    job = {"kind": "GenericJob", "metadata": {"name": "train-1", "uid": "u1"},
           "status": {"phase": "Failed", "rootCause": {"replica": "train-1-worker-0", "exitCode": 3}}}  # fmt: skip
    evidence = {"summary.json": '{"phase": "Failed", "replicas": {"train-1-worker-0": {"phase": "Failed"}}}',
                "train-1-worker-0.log": "boom\n"}  # fmt: skip
    got = row(earlier, job, [], evidence, "u2")
    assert (got["status"], got["phase"], got["root_cause"]["replica"], got["root_cause"]["exit_code"]) == (
        "present",
        "Failed",
        "train-1-worker-0",
        3,
    )
    assert [r["log"] for r in got["kept"]["replicas"]] == ["boom\n"]
    assert row(earlier, None, [], None, "u2")["status"] == "gone"
    assert row(earlier, job, [], evidence, "u1")["status"] == "current"  # a try that reattached to this try's job
    assert row({**earlier, "job": None}, None, [], None, "u2")["status"] == "none"
