"""Evidence survives clean-up (issue 23, point 3): the pods go only once what they said is kept."""

from __future__ import annotations

import json

import pytest

from airflow_t9k.controller.reconcile.actions import KeepEvidence
from airflow_t9k.controller.reconcile.evidence import ANNOTATION_LINES, DEFAULT_LINES, MAX_LINES, log_lines
from tests.builders import generic, pod, run, service


def finished(code: int = 3) -> tuple[dict, list[dict]]:
    job = generic("j", failureRules=[{"worker": [0]}], cleanUpPolicy="All")
    failed = pod("j-worker-0", "Failed", code)
    failed["status"]["containerStatuses"][0]["state"]["terminated"].update(
        message="loss is nan", finishedAt="2026-11-25T11:59:00Z"
    )
    return job, [failed, pod("j-worker-1"), service("j-worker-0"), service("j-worker-1")]


def test_the_finishing_pass_keeps_the_evidence_and_holds_the_pods():
    job, observed = finished()
    p = run(job, *observed, status={"phase": "Running"}, evidence_kept=False)
    assert p.status["phase"] == "Failed"
    [keep] = [a for a in p.actions if isinstance(a, KeepEvidence)]
    assert keep.name == "j-evidence"
    assert sorted(keep.pods) == ["j-worker-0", "j-worker-1"]
    assert keep.lines == DEFAULT_LINES
    assert p.deletes("Pod") == []  # not before the ConfigMap is seen
    assert sorted(p.deletes("Service")) == ["j-worker-0", "j-worker-1"]
    owner = keep.manifest["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("GenericJob", "j", True)
    summary = json.loads(keep.manifest["data"]["summary.json"])
    assert summary["phase"] == "Failed"
    assert summary["rootCause"]["replica"] == "j-worker-0"
    [container] = summary["replicas"]["j-worker-0"]["containers"]
    assert (container["exitCode"], container["message"]) == (3, "loss is nan")


def test_once_the_evidence_is_seen_the_pods_go():
    job, observed = finished()
    first = run(job, *observed, status={"phase": "Running"}, evidence_kept=False)
    again = run(job, *observed, status=first.status, evidence_kept=True)
    assert sorted(again.deletes("Pod")) == ["j-worker-0", "j-worker-1"]
    assert not [a for a in again.actions if isinstance(a, KeepEvidence)]


def test_a_repeated_pass_before_the_configmap_is_seen_asks_again_and_deletes_nothing():
    job, observed = finished()
    first = run(job, *observed, status={"phase": "Running"}, evidence_kept=False)
    again = run(job, *observed, status=first.status, evidence_kept=False)  # a create answered AlreadyExists is fine
    assert [a.name for a in again.actions if isinstance(a, KeepEvidence)] == ["j-evidence"]
    assert again.deletes("Pod") == []


def test_evidence_that_cannot_be_kept_holds_clean_up_back_for_a_minute_only():
    job, observed = finished()
    first = run(job, *observed, status={"phase": "Running"}, evidence_kept=False)
    status = json.loads(json.dumps(first.status))
    for c in status["conditions"]:
        if c["type"] == "Failed":
            c["lastTransitionTime"] = "2026-11-25T11:58:00Z"  # two minutes before NOW
    late = run(job, *observed, status=status, evidence_kept=False)
    assert sorted(late.deletes("Pod")) == ["j-worker-0", "j-worker-1"]


def test_nothing_to_delete_keeps_nothing():
    job, observed = finished()
    job["spec"]["cleanUpPolicy"] = "None"
    p = run(job, *observed, status={"phase": "Running"}, evidence_kept=False)
    assert not [a for a in p.actions if isinstance(a, KeepEvidence)]


@pytest.mark.parametrize(
    ("value", "lines"), [(None, DEFAULT_LINES), ("7", 7), ("0", 0), ("99999", MAX_LINES), ("-3", 0), ("x", DEFAULT_LINES)]
)
def test_how_many_log_lines_are_kept(value, lines):
    job = generic("j")
    if value is not None:
        job["metadata"]["annotations"] = {ANNOTATION_LINES: value}
    assert log_lines(job) == lines
