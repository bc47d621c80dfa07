"""k8s/client.py LineSplitter(log=True): the lines of a pod log, whatever the chunking (issue 44,
3). A progress bar's ``\\r`` redraws come as the line's last redraw, after its stamp; a line of
megabytes comes once, cut at the cap with the cut mark, and the lines after it come as they are;
the rest of a cut line never comes as a line of its own; the buffer never holds the line."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from airflow_t9k.k8s.client import CUT_MARK, STAMP_ROOM, Kube, LineSplitter, cut_line

S1 = b"2026-11-26T10:00:01.000000001Z "
S2 = b"2026-11-26T10:00:02.000000002+08:00 "
MIB = 1 << 20
CAP = 1024


def mark(n: int) -> bytes:
    return CUT_MARK.format(n).encode()


def cut(text: bytes, dropped: int = 0) -> bytes:
    """What a text longer than CAP becomes: its start and the mark counting what was left out."""
    keep = CAP - 40
    return text[:keep] + mark(dropped + len(text) - keep)


BIG = b"x" * (5 * MIB)
BAR = b"".join(b"\r%3d%%|%s| %d/100" % (i, b"#" * (i // 10), i) for i in range(101))  # tqdm, redrawn


CASES = [
    # (stream, the lines)
    pytest.param(S1 + b"one\n" + S1 + b"two\n", [S1 + b"one", S1 + b"two"], id="plain"),
    pytest.param(S1 + b"a\rb\rc\n" + S2 + b"next\n", [S1 + b"c", S2 + b"next"], id="redraws-keep-the-last"),
    pytest.param(S1 + BAR + b"\n", [S1 + b"100%|##########| 100/100"], id="a-bar-from-its-first-draw"),
    pytest.param(S1 + b"done\r\n", [S1 + b"done"], id="crlf-is-a-line-end"),
    pytest.param(S1 + b"bar 50%\r        \r\n", [S1 + b"bar 50%"], id="an-erased-bar-keeps-its-last-text"),
    pytest.param(S1 + b"\r\r\n", [S1], id="only-redraws-of-nothing"),
    pytest.param(S1 + b"\n" + b"\n", [S1, b""], id="empty-lines"),
    pytest.param(b"no stamp a\rb\n", [b"b"], id="unstamped"),
    pytest.param(S1 + BIG + b"\n" + S2 + b"marker\n", [S1 + cut(BIG), S2 + b"marker"], id="a-5MiB-line-then-a-line"),
    pytest.param(
        S1 + b"y" * (CAP + 1) + b"\n" + S1 + b"short\n", [S1 + cut(b"y" * (CAP + 1)), S1 + b"short"], id="just-past-the-cap"
    ),
    pytest.param(S1 + b"z" * CAP + b"\n", [S1 + b"z" * CAP], id="at-the-cap-whole"),
    pytest.param(
        S1 + (b"\r" + b"p" * 100) * 50_000 + b"\n" + S2 + b"marker\n",
        [S1 + b"p" * 100, S2 + b"marker"],
        id="5MB-of-redraws-then-a-line",
    ),
    pytest.param(S1 + b"w" * 3000 + b"\rshort\n", [S1 + b"short"], id="a-long-redraw-then-a-short-one"),
    pytest.param(S1 + b"short\r" + b"w" * 3000 + b"\n", [S1 + cut(b"w" * 3000)], id="the-last-redraw-cut"),
    pytest.param(S1 + "é".encode() * 600 + b"\n", [S1 + "é".encode() * 492 + mark(1200 - 984)], id="cut-between-characters"),
]


def _feed(stream: bytes, seed: int, max_line: int = CAP) -> tuple[LineSplitter, list[bytes]]:
    rnd = random.Random(seed)
    splitter, got, at = LineSplitter(max_line, log=True), [], 0
    while at < len(stream):
        size = rnd.choice([1, 2, 3, 7, 64, 4096, 65536, MIB])
        got += splitter.feed(stream[at : at + size])
        at += size
    return splitter, got


@pytest.mark.parametrize(("stream", "expected"), CASES)
@pytest.mark.parametrize("seed", range(3))
def test_the_lines_of_a_pod_log(stream, expected, seed):
    splitter, got = _feed(stream, seed)
    assert got == expected
    assert splitter.flush() == []


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        (S1 + b"ended without its newline", [S1 + b"ended without its newline"]),
        (S1 + b"tqdm 10%\rtqdm 20%", [S1 + b"tqdm 20%"]),
        (S1 + BIG, [S1 + cut(BIG)]),
        (b"", []),
    ],
    ids=["plain", "redraws", "5MiB", "nothing"],
)  # fmt: skip
def test_the_last_line_without_its_newline_comes_on_flush(stream, expected):
    splitter, got = _feed(stream, 0)
    assert got == []
    assert splitter.flush() == expected


def test_a_line_of_megabytes_is_never_held():
    splitter = LineSplitter(16 * 1024, log=True)
    for _ in range(80):  # 5 MiB in 64 KiB chunks, with and without redraws
        assert splitter.feed(S1 if splitter._stamp is None and not splitter._pieces else b"q" * 65536) == []
        assert splitter._size <= 16 * 1024 + STAMP_ROOM
    for _ in range(80):
        assert splitter.feed((b"r" * 99 + b"\r") * 655) == []
        assert splitter._size <= 16 * 1024 + STAMP_ROOM
        assert len((splitter._kept or (b"", 0))[0]) <= 16 * 1024 + STAMP_ROOM
    assert splitter.feed(b"last redraw\n" + S2 + b"after\n") == [S1 + b"last redraw", S2 + b"after"]


@pytest.mark.parametrize(
    ("text", "dropped", "expected"),
    [
        (b"short", 0, b"short"),
        (b"a" * 100, 0, b"a" * 100),  # at the cap: whole
        (b"a" * 101, 0, b"a" * 60 + mark(41)),
        (b"b" * 60, 7, b"b" * 60 + mark(7)),  # the splitter left 7 bytes out already
        (b"a" + b"\xe4\xb8\xad" * 34, 0, b"a" + b"\xe4\xb8\xad" * 19 + mark(45)),  # not inside a character
    ],
)  # fmt: skip
def test_cut_line_stays_within_its_cap_and_counts_what_it_left_out(text, dropped, expected):
    got = cut_line(text, 100, dropped)
    assert got == expected
    assert len(got) <= 100


def test_the_plain_splitter_is_as_it_was():
    """Without ``log``, a ``\\r`` is text and a long line is cut without a mark (watches, progress)."""
    splitter = LineSplitter(8)
    assert splitter.feed(b"a\rb\n" + b"c" * 20 + b"\nd\n") == [b"a\rb", b"c" * 8, b"d"]


class _Content:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> Any:
        for chunk in self.chunks:
            await asyncio.sleep(0)
            yield chunk


class _Resp:
    status = 200

    def __init__(self, chunks: list[bytes]) -> None:
        self.content = _Content(chunks)

    def release(self) -> None:
        pass


class _Transport:
    host = "https://k8s"

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def send(self, *_: Any) -> _Resp:
        return _Resp(self.chunks)

    async def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("flush", "expected"),
    [(False, [S1 + cut(BIG), S2 + b"bar 100%"]), (True, [S1 + cut(BIG), S2 + b"bar 100%", S2 + b"partial"])],
)
def test_kube_lines_splits_a_pod_log(flush, expected):
    stream = S1 + BIG + b"\n" + S2 + b"bar 1%\rbar 100%\n" + S2 + b"partial"
    chunks = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]

    async def read() -> list[bytes]:
        kube = Kube(_Transport(chunks))
        return [line async for line in kube.lines("/log", query={}, max_line=CAP, log=True, flush=flush)]

    assert asyncio.run(read()) == expected
