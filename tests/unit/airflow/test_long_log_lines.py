"""One long log line never drops the lines after it (issue 44, 3): a progress bar redrawn with
``\\r`` for an hour, or any line of megabytes, in the trigger's followers and end-of-job read, in
the worker side's, and in the failure's tails (api/failed.py) and the event that carries one.

The API server is faked at the transport: the trigger reads through the real ``Kube.lines``, whose
answer mimics aiohttp's (its line iteration refuses a line past 2 x its 64 KiB read buffer, as
the ApiClient's session does); the worker side reads a real urllib3 response."""

from __future__ import annotations

import asyncio
import io
import logging
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
import urllib3

from airflow_t9k.api.failed import FailedLogs, FailedReplica, cap_line, log_lines, tail_of
from airflow_t9k.api.logcursor import Cursor, instant
from airflow_t9k.api.paths import LOG_LINE_BYTES, LOG_TAIL_BYTES, LOG_TAIL_LINE_BYTES
from airflow_t9k.k8s.client import Kube

MIB = 1 << 20
BIG = "x" * (5 * MIB)  # one line of 5 MiB
BAR = "".join(f"\r{i:3d}%|{'#' * (i // 10):10s}| {i}/100" for i in range(101))  # a tqdm bar, redrawn
LAST_REDRAW = "100%|##########| 100/100"
OWNER = "job-uid"


def stamp(second: int, n: int = 0) -> str:
    return f"2026-11-26T10:00:{second:02d}.{n:09d}Z"


def cut_mark(line: str) -> bool:
    return "\u2026 [cut: " in line and line.endswith(" bytes]")


# -- the trigger ----------------------------------------------------------------------------


class _Content:
    """An answer's body as aiohttp gives it: ``iter_any()`` chunks, or its own line iteration,
    which fails on a line longer than twice its read buffer ("Chunk too big")."""

    def __init__(self, data: bytes, error: Exception | None) -> None:
        self.data, self.error = data, error

    async def iter_any(self) -> Any:
        for i in range(0, len(self.data), 1 << 16):
            await asyncio.sleep(0)
            yield self.data[i : i + (1 << 16)]
        if self.error is not None:
            raise self.error

    def __aiter__(self) -> Any:
        return self._lines()

    async def _lines(self) -> Any:
        for line in self.data.splitlines(keepends=True):
            await asyncio.sleep(0)
            if len(line) > 2 << 16:
                raise ValueError("Chunk too big")
            yield line
        if self.error is not None:
            raise self.error


class _Resp:
    status = 200

    def __init__(self, data: bytes, error: Exception | None) -> None:
        self.content = _Content(data, error)

    async def read(self) -> bytes:
        return b""

    def release(self) -> None:
        pass


class FakeLogs:
    """The replicas' logs as the API server serves them: each read from ``sinceTime``'s second on;
    ``breaks[pod]``: how many of its reads break off after their first ``n`` lines."""

    def __init__(self, logs: dict[str, list[tuple[str, str]]], breaks: dict[str, list[int]] | None = None) -> None:
        self.logs, self.breaks, self.reads = logs, {k: list(v) for k, v in (breaks or {}).items()}, []

    async def send(self, method: str, path: str, query: list[tuple[str, Any]], *_: Any) -> _Resp:
        pod = path.split("/")[-2]
        q = dict(query)
        self.reads.append((pod, q.get("follow")))
        since = instant(str(q["sinceTime"])) if q.get("sinceTime") else 0
        lines = [f"{s} {t}\n".encode() for s, t in self.logs[pod] if (instant(s) or 0) >= (since or 0)]
        broken = self.breaks.get(pod) or []
        if broken:
            n = broken.pop(0)
            return _Resp(b"".join(lines[:n]), aiohttp.ClientPayloadError("Response payload is not completed"))
        return _Resp(b"".join(lines), None)

    host = "https://k8s"

    async def close(self) -> None:
        pass


class FakeHook:
    def __init__(self, logs: FakeLogs) -> None:
        self._kube = Kube(logs)

    async def kube(self) -> Kube:
        return self._kube

    async def get_pod(self, pod: str, namespace: str) -> dict:
        return {"metadata": {"name": pod, "ownerReferences": [{"uid": OWNER, "controller": True}]}}


class FakeWatch:
    def __init__(self, job: dict, logs: FakeLogs) -> None:
        self.job, self.hook, self.waiters = job, FakeHook(logs), []

    def subscribe(self, name: str) -> asyncio.Event:
        self.waiters.append(asyncio.Event())
        return self.waiters[-1]

    def unsubscribe(self, name: str, waiter: asyncio.Event) -> None:
        pass

    async def synced(self) -> None:
        pass

    def get(self, namespace: str, name: str) -> dict:
        return self.job

    def change(self, job: dict) -> None:
        self.job = job
        for waiter in self.waiters:
            waiter.set()


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def forwarded(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == logging.INFO and r.getMessage().startswith("[j-")]

    def warnings(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == logging.WARNING]


def _job(phase: str, *pods: str, replica_phase: str = "Running") -> dict:
    replicas = [{"name": p, "uid": f"uid-{p}", "phase": replica_phase} for p in pods]
    return {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml", "uid": OWNER},
            "status": {"phase": phase, "tasks": [{"type": "worker", "status": replicas}]}}  # fmt: skip


def _trigger(name: str) -> tuple[Any, Lines]:
    from airflow_t9k.triggers.job import T9kJobTrigger

    trigger = T9kJobTrigger(
        job={"kind": "GenericJob", "namespace": "ml", "name": "j", "uid": OWNER},
        connection={"kubernetes_conn_id": "k8s"},
        policy={},
        forwarding={"stream_logs": True, "max_log_lines": 1000, "max_followed_pods": 8, "log_events": False,
                    "events_since": "2026-11-26T10:00:00+00:00"},
    )  # fmt: skip
    logger = logging.getLogger(f"t9k-test-long-{name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = Lines()
    logger.handlers[:] = [handler]
    trigger._log = logger
    return trigger, handler


async def _until(check: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.01)


DRAIN_CASES = [
    # (the replicas' logs, reads of theirs that break off after n lines, what reaches the task log, warnings)
    pytest.param({"j-worker-0": [(stamp(1), "before"), (stamp(2), BIG), (stamp(3), "marker 0")],
                  "j-worker-1": [(stamp(1), "marker 1")]}, {},
                 ["[j-worker-0] before", "[j-worker-0] <cut>", "[j-worker-0] marker 0", "[j-worker-1] marker 1"], 0,
                 id="a-5MiB-line-then-the-next-replica"),
    pytest.param({"j-worker-0": [(stamp(1), f"epoch 1{BAR}"), (stamp(1, 1), "marker 0")],
                  "j-worker-1": [(stamp(1), "marker 1")]}, {},
                 [f"[j-worker-0] {LAST_REDRAW}", "[j-worker-0] marker 0", "[j-worker-1] marker 1"], 0,
                 id="redraws-come-as-the-last"),
    pytest.param({"j-worker-0": [(stamp(1), "before"), (stamp(2), "lost")], "j-worker-1": [(stamp(1), "marker 1")]},
                 {"j-worker-0": [1]},
                 ["[j-worker-0] before", "[j-worker-1] marker 1"], 1, id="a-broken-read-then-the-next-replica"),
]  # fmt: skip


@pytest.mark.parametrize(("logs", "breaks", "expected", "warnings"), DRAIN_CASES)
def test_the_end_of_job_read_goes_past_a_long_line_or_a_broken_replica(logs, breaks, expected, warnings):
    """The job ended before any follower ran: each replica's log is read once (``_drain``)."""
    trigger, lines = _trigger("drain")
    ended = _job("Succeeded", *logs, replica_phase="Succeeded")
    trigger._log_ending = ended

    async def run() -> None:
        await trigger._follow_logs(FakeWatch(ended, FakeLogs(logs, breaks)))

    asyncio.run(run())
    got = ["[j-worker-0] <cut>" if cut_mark(line) else line for line in lines.forwarded()]
    assert got == expected
    assert all(len(line.encode()) <= LOG_LINE_BYTES + 20 for line in lines.forwarded())
    assert len(lines.warnings()) == warnings


@pytest.mark.parametrize("restarted_by", ["timer", "change"])
def test_a_follower_that_broke_off_is_started_again_without_repeating_a_line(restarted_by, monkeypatch):
    """A stream that breaks (the API server restarted, a proxy cut it) is said once and
    followed again from its cursor, while the job runs: by the job's next change, or a timer."""
    from airflow_t9k.triggers import forward

    monkeypatch.setattr(forward, "RESTART_AFTER", 0.05 if restarted_by == "timer" else 60.0, raising=False)
    trigger, lines = _trigger(f"restart-{restarted_by}")
    log = [(stamp(1), "one"), (stamp(1, 1), "two"), (stamp(2), BIG), (stamp(3), f"bar{BAR}"), (stamp(4), "marker")]
    # The first read breaks after 2 lines; by the timer, the second breaks at once too (then it waits
    # RESTART_AFTER); the job's change comes after the first.
    breaks = [2, 0] if restarted_by == "timer" else [2]
    fake = FakeLogs({"j-worker-0": log}, {"j-worker-0": breaks})
    running = _job("Running", "j-worker-0")
    watch = FakeWatch(running, fake)

    async def run() -> None:
        trigger._log_task = asyncio.create_task(trigger._follow_logs(watch))
        await _until(lambda: len(fake.reads) >= len(breaks) and len(lines.warnings()) == 1)
        if restarted_by == "change":
            await asyncio.sleep(0.2)
            assert len(fake.reads) == 1  # no polling: it waits for the job's next change
            watch.change(_job("Running", "j-worker-0"))  # the replica's status moved on
        await _until(lambda: any("marker" in line for line in lines.forwarded()))  # while the job still runs
        await trigger.logs_drained(_job("Succeeded", "j-worker-0", replica_phase="Succeeded"))

    asyncio.run(run())
    got = ["[j-worker-0] <cut>" if cut_mark(line) else line for line in lines.forwarded()]
    assert got == ["[j-worker-0] one", "[j-worker-0] two", "[j-worker-0] <cut>", f"[j-worker-0] {LAST_REDRAW}",
                   "[j-worker-0] marker"]  # fmt: skip
    assert len(lines.warnings()) == 1, lines.warnings()  # said once, though it broke twice
    assert "j-worker-0" in lines.warnings()[0]


def test_the_failure_event_carries_a_bounded_tail():
    """The trigger's failed-logs report: the root cause's tail in the event (next_kwargs) is
    bounded per line and in all, whatever the log holds."""
    trigger, lines = _trigger("event")
    log = "".join(f"{stamp(1, i)} step {i} {'y' * 3000}\n" for i in range(40)) + f"{stamp(2)} {BIG}\n"
    log += f"{stamp(3)} bar{BAR}\n{stamp(3, 1)} Traceback (most recent call last):\n{stamp(3, 2)} ValueError: bad batch\n"

    class Hook:
        async def list_replica_pods(self, *_: Any) -> list:
            return [{"metadata": {"name": "j-worker-0"}, "status": {}}]

        async def read_log_tail(self, pod: str, namespace: str, n: int | None, **_: Any) -> str:
            records = [line + "\n" for line in log.split("\n")[:-1]]  # the API server's tailLines: newlines only
            return "".join(records[-n:] if n else records)

        async def close(self) -> None:
            pass

    trigger.make_hook = Hook
    failed = _job("Failed", "j-worker-0", replica_phase="Failed")
    report = asyncio.run(trigger._failed_logs(failed))
    tail = report["logs"]["j-worker-0"]
    assert len(tail.encode()) <= LOG_TAIL_BYTES
    assert tail.endswith(f"\n{LAST_REDRAW}\nTraceback (most recent call last):\nValueError: bad batch")
    assert all(len(line.encode()) <= LOG_TAIL_LINE_BYTES for line in tail.split("\n"))
    printed = "\n".join(r.getMessage() for r in lines.records)
    assert "ValueError: bad batch" in printed
    assert BIG not in printed


# -- the worker side --------------------------------------------------------------------------


class SyncHook:
    """The worker's hook as far as LogFollower uses it: its ApiClient answers with real urllib3
    responses of the log from ``sinceTime``'s second on."""

    def __init__(self, logs: dict[str, list[tuple[str, str]]]) -> None:
        self.logs, self.reads = logs, 0
        self.api_client = SimpleNamespace(call_api=self.call_api)

    def call_api(self, path: str, method: str, query_params: list, **_: Any) -> urllib3.HTTPResponse:
        self.reads += 1
        pod, q = path.split("/")[-2], dict(query_params)
        since = instant(str(q.get("sinceTime") or "")) or 0
        body = "".join(f"{s} {t}\n" for s, t in self.logs[pod] if (instant(s) or 0) >= since).encode()
        return urllib3.HTTPResponse(body=io.BytesIO(body), status=200, preload_content=False)

    def get_pod(self, pod: str, namespace: str) -> dict:
        return {"metadata": {"name": pod, "ownerReferences": [{"uid": OWNER, "controller": True}]}}


def _follower(hook: SyncHook, name: str) -> tuple[Any, Lines]:
    from airflow_t9k.operators.logs import LogFollower

    logger = logging.getLogger(f"t9k-test-long-worker-{name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = Lines()
    logger.handlers[:] = [handler]
    follower = LogFollower(hook, "ml", logger, 1000, 8, None, owner_uid=OWNER)
    follower.started = "2026-11-26T10:00:00Z"
    return follower, handler


WORKER_CASES = [
    pytest.param([(stamp(1), "before"), (stamp(2), BIG), (stamp(3), "marker")],
                 ["[j-worker-0] before", "[j-worker-0] <cut>", "[j-worker-0] marker"], id="a-5MiB-line"),
    pytest.param([(stamp(1), f"epoch 1{BAR}"), (stamp(1, 1), "marker")],
                 [f"[j-worker-0] {LAST_REDRAW}", "[j-worker-0] marker"], id="redraws"),
]  # fmt: skip


@pytest.mark.parametrize(("log", "expected"), WORKER_CASES)
@pytest.mark.parametrize("how", ["follow", "read-at-the-end"])
def test_the_worker_side_bounds_a_long_line_and_forwards_the_next(log, expected, how):
    import time

    hook = SyncHook({"j-worker-0": log})
    follower, lines = _follower(hook, how)
    if how == "follow":
        follower.update(_job("Running", "j-worker-0"))
        deadline = time.monotonic() + 10
        while not any("marker" in line for line in lines.forwarded()) and time.monotonic() < deadline:
            time.sleep(0.02)
        follower.stop(grace=0)
    else:
        follower.finish(_job("Succeeded", "j-worker-0", replica_phase="Succeeded"))
    got = ["[j-worker-0] <cut>" if cut_mark(line) else line for line in lines.forwarded()]
    assert got == expected
    assert all(len(line.encode()) <= LOG_LINE_BYTES + 20 for line in lines.forwarded())


def test_the_workers_tail_read_is_bounded():
    from airflow_t9k.hooks.t9k import T9kHook

    body = f"{stamp(1)} {BIG}\n{stamp(2)} a{BAR}\n{stamp(3)} end".encode()
    resp = urllib3.HTTPResponse(body=io.BytesIO(body), status=200, preload_content=False)
    hook = T9kHook.__new__(T9kHook)
    hook.__dict__["api_client"] = SimpleNamespace(call_api=lambda *_, **__: resp)
    hook._boundary = lambda *_: __import__("contextlib").nullcontext()  # type: ignore[method-assign]
    text = hook.read_log_tail("p", "ns", 3, timestamps=True)
    first, second, third = text.split("\n")[:3]
    assert first.startswith(stamp(1) + " xxx")
    assert cut_mark(first)
    assert len(first.encode()) <= LOG_LINE_BYTES + 40
    assert second == f"{stamp(2)} {LAST_REDRAW}"
    assert third == f"{stamp(3)} end"


# -- the failure's tails (pure) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "count", "expected"),
    [
        (["Traceback", "ValueError: bad"], 50, "Traceback\nValueError: bad"),
        (["a", "b", "c"], 2, "b\nc"),
        (["a", "b"], 0, ""),
        ([BIG, "end"], 50, "x" * (LOG_TAIL_LINE_BYTES - 40) + f" \u2026 [cut: {5 * MIB - LOG_TAIL_LINE_BYTES + 40} bytes]\nend"),
        # a line the splitter cut already: its mark keeps counting from the line as printed
        (["z" * (LOG_LINE_BYTES - 40) + " \u2026 [cut: 1000 bytes]"], 1,
         "z" * (LOG_TAIL_LINE_BYTES - 40) + f" \u2026 [cut: {1000 + LOG_LINE_BYTES - LOG_TAIL_LINE_BYTES} bytes]"),
        # 50 lines of 2 KiB: the last that fit in LOG_TAIL_BYTES, after a line saying how many were left out
        ([f"{i:04d}" + "w" * 2000 for i in range(50)], 50, None),
    ],
    ids=["short", "last-lines", "none", "a-5MiB-line", "cut-again", "in-all"],
)  # fmt: skip
def test_the_tail_in_the_event_is_bounded_per_line_and_in_all(lines, count, expected):
    tail = tail_of(lines, count)
    assert len(tail.encode()) <= LOG_TAIL_BYTES
    assert all(len(line.encode()) <= LOG_TAIL_LINE_BYTES for line in tail.split("\n"))
    if expected is not None:
        assert tail == expected
    else:
        kept = tail.split("\n")
        assert kept[0] == f"\u2026 [cut: {50 - (len(kept) - 1)} earlier lines]"
        assert kept[-1].startswith("0049")
        assert 10 <= len(kept) - 1 < 50


@pytest.mark.parametrize(
    ("line", "expected"),
    [("short", "short"), ("é" * 10, "é" * 10), ("a" * 200, "a" * 60 + " \u2026 [cut: 140 bytes]")],
)
def test_cap_line(line, expected):
    assert cap_line(line, 100) == expected


def test_a_failed_replicas_log_with_a_long_line_is_printed_bounded_and_the_lines_after_it_too():
    text = f"{stamp(1)} one\n{stamp(2)} {BIG}\n{stamp(3)} tqdm{BAR}\n{stamp(3, 1)} Traceback\n{stamp(3, 2)} Error: x\n"
    plan = FailedLogs([FailedReplica("a", None)], 100, 8, tail_lines=50)
    printed = plan.add("a", text, 100)
    assert printed[0] == "one"
    assert cut_mark(printed[1])
    assert printed[2:] == [LAST_REDRAW, "Traceback", "Error: x"]
    assert all(len(line.encode()) <= LOG_LINE_BYTES for line in printed)
    tail = plan.report()["logs"]["a"]
    assert len(tail.encode()) <= LOG_TAIL_BYTES
    assert tail.endswith("Traceback\nError: x")


def test_a_cut_line_keeps_its_stamp_so_a_streamed_one_is_not_printed_again():
    """The wait streamed up to the 5 MiB line (its cursor counts it at its stamp): the failure's
    read from that second on prints only what came after it."""
    text = f"{stamp(2)} {BIG}\n{stamp(2, 1)} after\n"
    cursor = Cursor()
    cursor.sent(stamp(2))
    plan = FailedLogs([FailedReplica("a", None)], 100, 8, tail_lines=5, streamed={"a": cursor})
    assert plan.add("a", text, 100) == ["after"]
    assert [cut_mark(line) for line in log_lines(text)] == [True, False]


@pytest.mark.parametrize(
    ("text", "at", "left", "asked", "expected"),
    [("2026-01-01T00:00:05Z a\n2026-01-01T00:00:06Z b\n2026-01-01T00:00:07Z c\n", None, 0, 5, ["a", "b", "c"]),
     ("2026-01-01T00:00:05Z a\n2026-01-01T00:00:06Z b\n2026-01-01T00:00:07Z c\n", "2026-01-01T00:00:06Z", 1, 5, ["c"]),
     # a read cut inside the run of the cursor's second: only later seconds are certainly new
     ("2026-01-01T00:00:06Z x\n2026-01-01T00:00:06Z y\n2026-01-01T00:00:07Z z\n", "2026-01-01T00:00:06Z", 5, 3, ["z"]),
     ("2026-01-01T00:00:05Z a\n", "2026-01-01T00:00:09Z", 1, 5, [])],
    ids=["never-sent", "after-the-cursor", "cut-in-the-cursors-second", "all-sent"],
)  # fmt: skip
def test_the_final_lines_are_those_not_forwarded_yet(text, at, left, asked, expected):
    from airflow_t9k.api.failed import final_lines
    from airflow_t9k.api.logcursor import Cursor

    cursor = None
    if at is not None:
        cursor = Cursor()
        for _ in range(left):
            cursor.sent(at)
    assert final_lines(text, cursor, asked) == expected


def test_a_retry_reads_on_from_where_a_lost_try_left_the_logs():
    """Issue 44, item 7: the worker-side cursor is kept (the task state store, ``snapshot``): lines
    written between a lost try and its retry reach the retry's log, and none is printed twice."""
    log = [(stamp(1), "step 1"), (stamp(2), "step 2"), (stamp(2, 1), "step 2b")]
    hook = SyncHook({"j-worker-0": log})
    first, lines = _follower(hook, "lost")
    first.finish(_job("Succeeded", "j-worker-0", replica_phase="Succeeded"))  # read what was there
    assert lines.forwarded() == ["[j-worker-0] step 1", "[j-worker-0] step 2", "[j-worker-0] step 2b"]
    saved = first.snapshot(OWNER)
    log += [(stamp(3), "step 3 (while no try ran)"), (stamp(4), "step 4")]  # the worker died; the training went on
    retry, again = _follower(hook, "retry")
    retry.started = stamp(4)  # the retry's own start: without the saved cursor, step 3 would be lost
    retry.resume_from(saved, OWNER)
    retry.finish(_job("Succeeded", "j-worker-0", replica_phase="Succeeded"))
    assert again.forwarded() == ["[j-worker-0] step 3 (while no try ran)", "[j-worker-0] step 4"]
    other, nothing = _follower(hook, "other-job")
    other.started = stamp(4)
    other.resume_from(saved, "another-uid")  # another job's cursor is not this one's
    other.finish(_job("Succeeded", "j-worker-0", replica_phase="Succeeded"))
    assert nothing.forwarded() == ["[j-worker-0] step 4"]


class TailHook(SyncHook):
    """Also answers ``read_log_tail`` as the API server does (``tailLines`` of what ``sinceTime`` keeps)."""

    def read_log_tail(self, pod: str, namespace: str, lines: int | None, timestamps: bool = False,
                      since: str | None = None) -> str:  # fmt: skip
        kept = [(s, t) for s, t in self.logs[pod] if (instant(s) or 0) >= (instant(since or "") or 0)]
        return "".join(f"{s} {t}\n" for s, t in kept[-lines if lines else 0 :])


def test_the_last_lines_after_the_budget_never_reach_back_before_the_wait():
    """The last lines printed once ``max_log_lines`` ran out are this wait's: a replica never
    followed is read from the wait's start, not its whole log (an earlier try's lines)."""
    log = [(stamp(1), "before this wait"), (stamp(5), "step 1"), (stamp(6), "step 2"), (stamp(7), "step 3")]
    follower, lines = _follower(TailHook({"j-worker-0": log}), "budget")
    follower.started = stamp(4)
    follower.budget = 0  # spent already
    follower.finish(_job("Succeeded", "j-worker-0", replica_phase="Succeeded"))
    printed = "\n".join(r.getMessage() for r in lines.records)
    assert "the last 3 lines of j-worker-0 (after max_log_lines=1000 ran out)" in printed
    assert "step 3" in printed
    assert "before this wait" not in printed
