"""Which job a sensor given labels follows (api/follow.py, issue 28 point 5): the one match, or
the newest try's job when the matches are one task's jobs."""

from __future__ import annotations

import pytest

from airflow_t9k.api.follow import Ambiguous, choose, task_selector

TASK = {"airflow-t9k.io/dag-id": "d", "airflow-t9k.io/run-id": "r", "airflow-t9k.io/task-id": "train",
        "airflow-t9k.io/map-index": "-1"}  # fmt: skip


def _job(name, try_number=None, created="2026-11-27T10:00:00Z", **identity):
    labels = {"airflow-t9k.io/try-number": str(try_number)} if try_number is not None else {}
    annotations = {**TASK, **{f"airflow-t9k.io/{k.replace('_', '-')}": v for k, v in identity.items()}} if try_number else {}
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations, "creationTimestamp": created}}


@pytest.mark.parametrize(
    ("matches", "expected"),
    [
        ([], None),
        ([_job("plain")], "plain"),  # one match: whatever it is
        ([_job("j", 1), _job("j-t2", 2)], "j-t2"),  # a retry's job: the newest try's
        ([_job("j-t3", 3), _job("j", 1), _job("j-t2", 2)], "j-t3"),
        ([_job("j-t2", 2, "2026-11-27T10:00:00Z"), _job("j-t2-2", 2, "2026-11-27T11:00:00Z")], "j-t2-2"),  # same try: newest
    ],
)  # fmt: skip
def test_the_newest_try_of_one_task_is_followed(matches, expected):
    found = choose(matches, "label selector 'x'")
    assert (found["metadata"]["name"] if found else None) == expected


@pytest.mark.parametrize(
    "matches",
    [
        [_job("a"), _job("b")],  # no task's jobs
        [_job("j", 1), _job("other", 1, task_id="eval")],  # two tasks
        [_job("j", 1), _job("plain")],
    ],
)
def test_matches_that_are_not_one_tasks_jobs_are_refused(matches):
    with pytest.raises(Ambiguous, match="matches 2 jobs"):
        choose(matches, "label selector 'x'")


def test_a_task_selector_names_the_task_by_its_labels():
    labels = {"dag-id": "d", "run-id": "manual__1", "task-id": "train", "map-index": "none"}
    assert task_selector(labels) == ("airflow-t9k.io/dag-id=d,airflow-t9k.io/run-id=manual__1,"
                                     "airflow-t9k.io/task-id=train,airflow-t9k.io/map-index=none")  # fmt: skip
