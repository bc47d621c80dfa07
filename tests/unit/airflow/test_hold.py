"""The trigger holds its event until ``[t9k] deferral_hold_seconds`` after the deferral (issue 28,
point 4): apache/airflow#72716 fails a try resumed before the scheduler read the deferring
process's exit."""

from __future__ import annotations

import pytest

from airflow_t9k.triggers.job import hold_left

DEFERRED = "2026-11-27T10:00:00.000000+00:00"
T0 = 1795773600.0  # DEFERRED as a timestamp


@pytest.mark.parametrize(
    ("deferred_at", "hold", "now", "left"),
    [
        (DEFERRED, 10.0, T0 + 1, 9.0),  # the job ended a second after the deferral
        (DEFERRED, 10.0, T0 + 10, 0.0),
        (DEFERRED, 10.0, T0 + 3600, 0.0),  # a job of an hour waits for nothing
        (DEFERRED, 0.0, T0 + 1, 0.0),  # turned off
        (DEFERRED, 10.0, T0 - 3600, 10.0),  # a triggerer's clock behind the worker's: never more than the hold
        (None, 10.0, T0, 0.0),  # a row of an earlier version without the time
        ("not a time", 10.0, T0, 0.0),
    ],
)  # fmt: skip
def test_the_event_is_held_only_within_the_window_after_the_deferral(deferred_at, hold, now, left):
    assert hold_left(deferred_at, hold, now) == pytest.approx(left)
