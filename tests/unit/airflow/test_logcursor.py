"""Log positions by stamp and count (api/logcursor.py): lines that share a stamp are all
forwarded, a reconnect skips exactly the lines sent, stamps compare as instants (issue 28, point 2)."""

from __future__ import annotations

import pytest

from airflow_t9k.api.failed import FailedLogs, FailedReplica
from airflow_t9k.api.logcursor import Cursor, instant, since_time, split, unsent

S = "2026-11-26T10:00:05.123456789Z"
NS = 1795687205_123456789


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        (S, NS),
        ("2026-11-26T18:00:05.123456789+08:00", NS),  # an offset: the same instant
        ("2026-11-26T05:00:05.123456789-0500", NS),
        ("2026-11-26T10:00:05.1234567891Z", None),  # more than nanoseconds: not RFC 3339 as the API writes it
        ("2026-11-26T10:00:05.5Z", 1795687205_500000000),  # fewer digits are not string-comparable
        ("2026-11-26T10:00:05Z", 1795687205_000000000),
        ("(log", None),
        ("", None),
    ],
)  # fmt: skip
def test_stamps_are_instants_whatever_their_offset_and_digits(stamp, expected):
    assert instant(stamp) == expected


def test_since_time_is_the_utc_second():
    assert since_time(instant("2026-11-26T18:00:05.9+08:00")) == "2026-11-26T10:00:05Z"


def _stream(*stamps: str) -> list[str]:
    return [f"{s} line {i}" for i, s in enumerate(stamps)]


A, B, C = "2026-11-26T10:00:05.000000000Z", "2026-11-26T10:00:05.500000000Z", "2026-11-26T10:00:06.000000000Z"


def test_a_stream_forwards_every_line_and_a_reconnect_skips_exactly_what_was_sent():
    cursor = Cursor()
    first = _stream(A, A, A, B, B)[:4]  # the stream broke after the first line stamped B
    for raw in first:  # within one stream nothing is filtered: each line is sent
        cursor.sent(split(raw)[0])
    assert (cursor.at, cursor.count, cursor.since()) == (instant(B), 1, "2026-11-26T10:00:05Z")
    # The reopened stream replays from 10:00:05: three lines at A, two at B, then one at C.
    replay = _stream(A, A, A, B, B, C)
    skip = cursor.resume()
    assert [raw for raw in replay if skip.fresh(split(raw)[0])] == [replay[4], replay[5]]


def test_a_run_of_one_stamp_is_counted_and_a_later_stamp_restarts_the_count():
    cursor = Cursor()
    for s in (A, A, A):
        cursor.sent(s)
    assert cursor.count == 3
    cursor.sent(B)
    assert (cursor.at, cursor.count) == (instant(B), 1)
    cursor.sent(A)  # an older stamp (another container's) never moves the position back
    assert (cursor.at, cursor.count) == (instant(B), 1)
    assert Cursor.from_dict(cursor.as_dict()) == cursor
    assert Cursor.from_dict({"at": "x"}) == Cursor()


def _read(*stamps: str) -> list[tuple[str, str]]:
    return [split(raw) for raw in _stream(*stamps)]


@pytest.mark.parametrize(
    ("read", "complete", "expected"),
    [
        (_read(A, A, A, C), True, (["line 2", "line 3"], True)),  # the whole run of A is in the read: skip 2 of it
        (_read(A, A, C), False, ([], False)),  # cut inside the run of A: cannot say which
        (_read(C, C), False, (["line 0", "line 1"], True)),  # cut after the run: all new
        (_read(), True, ([], True)),
    ],
    ids=["whole-run", "cut-inside-run", "cut-after-run", "empty"],
)  # fmt: skip
def test_unsent_lines_of_a_last_lines_read(read, complete, expected):
    cursor = Cursor(instant(A), 2)
    assert unsent(read, cursor, complete) == expected


def _log(*stamps: str) -> str:
    return "".join(f"{s} line {i}\n" for i, s in enumerate(stamps))


def _tail(text: str, n: int | None) -> str:
    return text if n is None else "".join(text.splitlines(keepends=True)[-n:])


@pytest.mark.parametrize(
    ("stamps", "sent", "max_lines", "expected", "reads"),
    [
        # CRI-O: the whole log shares one stamp; 3 lines were streamed, 2 are new
        ((A,) * 5, 3, 100, ["line 3", "line 4"], 1),
        # the budget cuts the read inside the run: read again with the lines sent, print the last 2 new
        ((A,) * 8, 3, 2, ["line 6", "line 7"], 2),
        # the run is longer than what was sent plus asked: the last lines are all new
        ((A,) * 20, 3, 2, ["line 18", "line 19"], 2),
        # nothing new after the last streamed line
        ((A,) * 3, 3, 100, [], 1),
    ],
    ids=["one-stamp", "cut-inside-run", "long-run", "nothing-new"],
)  # fmt: skip
def test_the_failed_print_skips_exactly_the_streamed_lines_that_share_a_stamp(stamps, sent, max_lines, expected, reads):
    text = _log(*stamps)
    cursor = Cursor()
    for s in stamps[:sent]:
        cursor.sent(s)
    plan = FailedLogs([FailedReplica("a", None)], max_lines, 8, tail_lines=2, streamed={"a": cursor})
    printed, n = None, 0
    while (step := plan.next_read()) is not None:
        pod, asked = step
        n += 1
        printed = plan.add(pod, _tail(text, asked), asked)
    assert (printed, n) == (expected, reads)
