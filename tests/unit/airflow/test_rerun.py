"""Which job a later try takes (api/rerun.py): a retry never trains a job that succeeded again;
a Clear runs it anew; a failure is run anew by the next try."""

from __future__ import annotations

import pytest

from airflow_t9k.api.rerun import CONSUMED_BY, DELIVERED_BY, first_try, take_again


@pytest.mark.parametrize(
    ("try_number", "max_tries", "retries", "expected"),
    [
        (1, 2, 2, 1),  # the first run
        (3, 2, 2, 1),  # its second retry: same series
        (4, 5, 2, 4),  # cleared after try 3: Airflow set max_tries = 3 + 2
        (5, 5, 2, 4),  # a retry after that Clear
        (2, 1, 0, 2),  # no retries: every later try is a Clear
        (2, None, 2, 2),  # Airflow does not say: a new series (runs anew, as before)
        (2, True, 2, 2),  # not an int
    ],
)  # fmt: skip
def test_the_first_try_of_a_series_is_airflows_own_arithmetic(try_number, max_tries, retries, expected):
    assert first_try(try_number, max_tries, retries) == expected


def _job(phase, **marks):
    return {"metadata": {"annotations": {k: str(v) for k, v in marks.items()}}, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("job", "series_start", "take"),
    [
        (_job("Running"), 3, True),
        (_job("Running", **{CONSUMED_BY: 1}), 3, True),  # wait_for_completion=False consumed it while it ran
        (_job("Succeeded"), 3, True),  # nobody delivered it: whoever finds it does
        (_job("Succeeded", **{DELIVERED_BY: 1}), 1, True),  # a retry: deliver again, never train again
        (_job("Succeeded", **{DELIVERED_BY: 2}), 1, True),
        (_job("Succeeded", **{DELIVERED_BY: 1}), 2, False),  # cleared since: run anew
        (_job("Succeeded", **{CONSUMED_BY: 1}), 1, True),  # marked by an earlier version: counts as delivered
        (_job("Succeeded", **{CONSUMED_BY: 1}), 2, False),
        (_job("Failed"), 2, True),  # the try that saw it fail died before marking: end with that failure
        (_job("Failed", **{CONSUMED_BY: 1}), 1, False),  # a retry after a failure runs anew
        (_job("Succeeded", **{DELIVERED_BY: "x"}), 2, True),  # an unreadable mark is no mark
    ],
    ids=["running", "running-consumed", "succeeded-undelivered", "retry-after-delivery", "retry-later-try",
         "clear-after-delivery", "old-mark-retry", "old-mark-clear", "failed-unconsumed", "failed-consumed", "bad-mark"],
)  # fmt: skip
def test_which_job_a_later_try_takes(job, series_start, take):
    assert take_again(job, series_start)[0] is take
