"""``progress_deadline=``: the job's ``progressDeadlineSeconds`` where its kind keeps it (hang
detection, issue 47 item 1; the controller's side is reconcile/stall.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.stall import note as stall_note
from airflow_t9k.kinds.registry import KINDS
from airflow_t9k.operators.job import T9kJobOperator
from airflow_t9k.operators.kinds import OPERATORS, AscendJobOperator
from tests.unit.airflow.test_operators import ctx, op


def _make(kind: str, **kw):
    cls = OPERATORS[kind]
    if cls is AscendJobOperator:
        kw.setdefault("replicas", 2)
    return op(cls, **kw)


@pytest.mark.parametrize("kind", sorted(k for k in OPERATORS if k != "BeamJob"))
def test_it_sets_the_kinds_progress_deadline_seconds(kind):
    job = _make(kind, progress_deadline=timedelta(minutes=10)).render_job(ctx())
    assert KINDS[kind].progress_deadline(job) == 600  # where the controller reads it
    if kind == "GenericJob":
        assert job["spec"]["progressDeadlineSeconds"] == 600
        assert "runPolicy" not in job["spec"]  # GenericJob has none: beside its other run settings
    else:
        assert job["spec"]["runPolicy"]["progressDeadlineSeconds"] == 600
    assert KINDS[kind].progress_deadline(_make(kind).render_job(ctx())) is None  # by default no stall is judged


@pytest.mark.parametrize(("given", "seconds"), [(1, 1), (900, 900), (0.2, 1), (90.5, 91), ("td:1.5", 2), ("td:3600", 3600)])
def test_it_takes_seconds_or_a_timedelta_rounded_up(given, seconds):
    value = timedelta(seconds=float(given[3:])) if isinstance(given, str) else given
    assert op(progress_deadline=value).render_job(ctx())["spec"]["progressDeadlineSeconds"] == seconds


@pytest.mark.parametrize("bad", [0, -1, "td:0", "td:-5", True, "600", float("inf"), float("nan")])
def test_a_bad_progress_deadline_fails_at_dag_parse(bad):
    value = timedelta(seconds=float(bad[3:])) if isinstance(bad, str) and bad.startswith("td:") else bad
    with pytest.raises(ValueError, match="progress_deadline must be a positive number of seconds"):
        op(progress_deadline=value)


def test_a_job_that_sets_it_too_must_agree():
    job = {"kind": "GenericJob", "spec": {"progressDeadlineSeconds": 300, "replicaSpecs": [
        {"type": "worker", "template": {"spec": {"containers": [{"name": "c", "image": "img"}]}}}]}}  # fmt: skip
    assert op(T9kJobOperator, job=job, progress_deadline=300).render_job(ctx())["spec"]["progressDeadlineSeconds"] == 300
    with pytest.raises(AirflowException, match="give one"):
        op(T9kJobOperator, job=job, progress_deadline=60).render_job(ctx())
    pt = {"kind": "PyTorchTrainingJob", "spec": {"runPolicy": "oops"}}
    with pytest.raises(AirflowException, match="not a mapping"):
        op(T9kJobOperator, job=yaml.safe_dump(pt), progress_deadline=60).render_job(ctx())


def test_it_is_refused_for_a_beamjob_which_reports_no_progress():
    with pytest.raises(AirflowException, match="no effect on a BeamJob"):
        _make("BeamJob", progress_deadline=60).render_job(ctx())
    assert "progressDeadlineSeconds" not in (_make("BeamJob").render_job(ctx())["spec"].get("runPolicy") or {})


def _stalled(status: str, at: str, message: str) -> dict:
    return {"status": {"conditions": [{"type": "Stalled", "status": status, "reason": "r", "message": message,
                                       "lastTransitionTime": at}]}}  # fmt: skip


def test_the_task_log_line_of_each_change_of_the_stalled_condition():
    assert stall_note({"status": {"conditions": []}}) is None
    assert stall_note(None) is None
    decided = stall_note(_stalled("True", "t1", "No replica reported progress for 600s ... then restarting every replica."))
    assert decided[1:] == ("stalled: No replica reported progress for 600s ... then restarting every replica.", True)
    restarted = stall_note(_stalled("True", "t1", "No replica ... Every replica was restarted at t2; waiting for a report."))
    assert restarted[0] != decided[0]  # the restart is a line of its own
    assert restarted[2] is True
    resumed = stall_note(_stalled("False", "t3", "Replica j-worker-0 reported progress at t3, after the restart at t2."))
    assert resumed[1:] == ("no longer stalled: Replica j-worker-0 reported progress at t3, after the restart at t2.", False)
    assert (
        stall_note(_stalled("False", "t3", "Replica j-worker-0 reported progress at t3, after the restart at t2."))[0]
        == resumed[0]
    )
