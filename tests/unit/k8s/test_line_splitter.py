"""k8s/client.py LineSplitter: the lines of a stream whatever its chunking, an over-long line cut
and the rest of it skipped (issue 29, 8: splitting is linear; benchmarks/line_split.py prints
the figures against the old front-of-buffer split)."""

from __future__ import annotations

import random

import pytest

from airflow_t9k.k8s.client import LineSplitter


def reference(stream: bytes, max_line: int | None) -> list[bytes]:
    lines = stream.split(b"\n")[:-1]  # the last, unterminated piece is not a line yet
    return [line if max_line is None else line[:max_line] for line in lines]


STREAMS = [
    b"",
    b"one\ntwo\n",
    b"no newline yet",
    b"\n\n\n",
    b"short\n" + b"x" * 50 + b"\nafter\n",  # a line longer than max_line=16
    b"y" * 100 + b"\n",
    b"".join(b"line %d\n" % n for n in range(2000)),
]


@pytest.mark.parametrize("stream", STREAMS, ids=range(len(STREAMS)))
@pytest.mark.parametrize("max_line", [None, 16])
@pytest.mark.parametrize("seed", range(5))
def test_the_lines_do_not_depend_on_the_chunking(stream, max_line, seed):
    rnd = random.Random(seed)
    splitter, got, at = LineSplitter(max_line), [], 0
    while at < len(stream):
        size = rnd.choice([1, 2, 3, 7, 64, 4096])
        got += splitter.feed(stream[at : at + size])
        at += size
    assert got == reference(stream, max_line)


def test_an_endless_line_is_cut_and_does_not_grow_the_buffer():
    splitter = LineSplitter(max_line=10)
    out = []
    for _ in range(1000):
        out += splitter.feed(b"z" * 1000)
        assert splitter._size <= 10  # nothing of it is kept past the cut
    out += splitter.feed(b"tail\nnext\n")
    assert out == [b"z" * 10, b"next"]  # the cut line once; its own tail is skipped
