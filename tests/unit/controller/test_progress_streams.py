"""controller/reports.py: one followed log per running job, started and stopped by the passes,
throttled notifications. The log is served by a fake with ``Kube.lines``' contract (the
integration tests follow real ones: tests/integration/test_progress.py)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from airflow_t9k.controller import reports
from airflow_t9k.controller.cli import log_pool_size
from airflow_t9k.controller.reports import ProgressStreams, recorded_values, reporting_pod
from airflow_t9k.k8s.errors import from_response
from tests.builders import generic

Obj = dict[str, Any]
KEY = ("GenericJob", "ns", "job")


class FakeLogs:
    """Pod logs by pod name: lines fed by the test; each open is recorded with its query."""

    def __init__(self) -> None:
        self.feeds: dict[str, asyncio.Queue[bytes | None]] = {}
        self.opened: list[tuple[str, Obj]] = []
        self.refuse: set[str] = set()

    def feed(self, pod: str, *lines: str) -> None:
        q = self.feeds.setdefault(pod, asyncio.Queue())
        for line in lines:
            q.put_nowait(line.encode())

    def end(self, pod: str) -> None:
        self.feeds.setdefault(pod, asyncio.Queue()).put_nowait(None)

    async def lines(self, path: str, *, query: Obj, timeout: float | None = None, max_line: int = 0):
        pod = path.split("/pods/")[1].split("/")[0]
        self.opened.append((pod, dict(query)))
        if pod in self.refuse:
            raise from_response(400, '{"message": "container is waiting to start"}')
        q = self.feeds.setdefault(pod, asyncio.Queue())
        while (line := await q.get()) is not None:
            yield line


def pod(name: str, uid: str | None = None, phase: str = "Running", started: str | None = "2026-11-25T12:00:00Z",
        cid: str | None = None) -> Obj:  # fmt: skip
    state: Obj = {"waiting": {"reason": "ContainerCreating"}}
    if started and phase == "Running":
        state = {"running": {"startedAt": started}}
    elif started:
        state = {"terminated": {"exitCode": 0, "startedAt": started, "finishedAt": "2026-11-25T12:05:00Z"}}
    return {"metadata": {"name": name, "uid": uid or f"uid-{name}"},
            "spec": {"containers": [{"name": "main"}, {"name": "sidecar"}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "main", "state": state,
                                                              **({"containerID": cid} if cid else {})}]}}  # fmt: skip


def pods(*ps: Obj) -> dict[str, Obj]:
    return {p["metadata"]["name"]: p for p in ps}


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def make(interval: float = 10.0, max_streams: int = 200) -> tuple[ProgressStreams, FakeLogs, list[Any], Counter[str]]:
    logs, queued, counts = FakeLogs(), [], Counter()
    return ProgressStreams(logs, queued.append, counts, interval, max_streams), logs, queued, counts  # type: ignore[arg-type]


def test_reporting_pod_is_the_deciding_replica_once_started():
    job = generic("job", ("master", 1), ("worker", 2), successRules=[{"worker": [1]}])
    assert reporting_pod(job, pods(pod("job-worker-0"), pod("job-worker-1")))[0]["metadata"]["name"] == "job-worker-1"
    assert reporting_pod(job, pods(pod("job-worker-1", started=None))) is None  # not started
    assert reporting_pod(job, {}) is None
    default = generic("job", ("worker", 2))  # no success rule: every replica decides, rank 0 of the first type
    found = reporting_pod(default, pods(pod("job-worker-0")))
    assert found is not None
    assert found[1] == "main"


def test_recorded_values_go_on_from_the_status():
    status = {"progress": {"step": 5, "totalSteps": 10, "epoch": 1, "metrics": {"loss": 0.5}, "summary": "50% 5/10"}}
    assert recorded_values(status) == {"step": 5, "total_steps": 10, "epoch": 1, "metrics": {"loss": 0.5}}
    assert recorded_values({"progress": "x"}) == {}
    assert recorded_values(None) == {}


@pytest.mark.asyncio
async def test_a_stream_opens_when_the_pod_starts_and_reports_what_it_read():
    streams, logs, queued, counts = make()
    job = generic("job", ("worker", 1))
    streams.sync(KEY, job, pods(pod("job-worker-0", started=None)))
    await settle()
    assert logs.opened == []
    assert streams.report(KEY, "uid-job") is None
    streams.sync(KEY, job, pods(pod("job-worker-0")))
    logs.feed("job-worker-0", "2026-11-25T12:00:01.5Z hello", "2026-11-25T12:00:02.1Z T9K_PROGRESS step=1 total_steps=10 loss=2",
              "2026-11-25T12:00:02.2Z T9K_PROGRESS {broken",
              '2026-11-25T12:00:03.0Z [rank0]: T9K_PROGRESS {"acc": 0.5}')  # fmt: skip
    await settle()
    assert logs.opened == [
        ("job-worker-0", {"follow": True, "timestamps": True, "container": "main", "sinceTime": "2026-11-25T12:00:00Z"})
    ]
    assert streams.report(KEY, "uid-job") == {"replica": "job-worker-0", "time": "2026-11-25T12:00:03Z",
                                              "values": {"step": 1, "total_steps": 10,
                                                         "metrics": {"loss": 2, "acc": 0.5}}}  # fmt: skip
    assert streams.report(KEY, "another-uid") is None
    assert queued == [KEY]  # the first report at once; the second waits for the interval
    assert (counts["progress_line"], counts["progress_line_ignored"]) == (2, 1)
    streams.sync(KEY, job, pods(pod("job-worker-0")))  # later passes keep the one stream
    await settle()
    assert len(logs.opened) == 1
    assert streams.active() == 1
    await streams.close()


@pytest.mark.asyncio
async def test_notifications_are_throttled_to_one_per_interval():
    streams, logs, queued, _ = make(interval=0.2)
    streams.sync(KEY, generic("job", ("worker", 1)), pods(pod("job-worker-0")))
    for i in range(50):
        logs.feed("job-worker-0", f"2026-11-25T12:00:{i:02d}Z T9K_PROGRESS step={i}")
    await settle()
    assert queued == [KEY]
    await asyncio.sleep(0.3)
    assert queued == [KEY, KEY]  # the rest arrive together, one interval later
    assert streams.report(KEY, "uid-job")["values"] == {"step": 49}
    await streams.close()


@pytest.mark.asyncio
async def test_a_reopened_stream_skips_lines_it_has_read(monkeypatch):
    monkeypatch.setattr(reports, "RETRY", (0.01, 0.01))
    streams, logs, _queued, counts = make(interval=0)
    streams.sync(KEY, generic("job", ("worker", 1)), pods(pod("job-worker-0")))
    logs.feed("job-worker-0", "2026-11-25T12:00:05.100Z T9K_PROGRESS step=1", "2026-11-25T12:00:05.200Z T9K_PROGRESS step=2")
    logs.end("job-worker-0")  # the connection drops; the server replays from the second (sinceTime)
    logs.feed("job-worker-0", "2026-11-25T12:00:05.100Z T9K_PROGRESS step=1", "2026-11-25T12:00:05.200Z T9K_PROGRESS step=2",
              "2026-11-25T12:00:06.000Z T9K_PROGRESS step=3")  # fmt: skip
    await asyncio.sleep(0.1)
    assert [q.get("sinceTime") for _, q in logs.opened] == ["2026-11-25T12:00:00Z", "2026-11-25T12:00:05Z"]
    assert counts["progress_line"] == 3
    assert streams.report(KEY, "uid-job")["values"] == {"step": 3}
    await streams.close()


@pytest.mark.asyncio
async def test_a_container_not_ready_for_logs_is_retried(monkeypatch):
    monkeypatch.setattr(reports, "RETRY", (0.01, 0.02))
    streams, logs, _, _ = make()
    logs.refuse.add("job-worker-0")
    streams.sync(KEY, generic("job", ("worker", 1)), pods(pod("job-worker-0")))
    await asyncio.sleep(0.05)
    logs.refuse.clear()
    logs.feed("job-worker-0", "2026-11-25T12:00:01Z T9K_PROGRESS step=4")
    await asyncio.sleep(0.05)
    assert len(logs.opened) >= 2
    assert streams.report(KEY, "uid-job")["values"] == {"step": 4}
    await streams.close()


@pytest.mark.asyncio
async def test_a_restarted_replica_is_followed_and_the_values_go_on(monkeypatch):
    streams, logs, _, _ = make()
    job = generic("job", ("worker", 1))
    streams.sync(KEY, job, pods(pod("job-worker-0", uid="a")))
    logs.feed("job-worker-0", "2026-11-25T12:00:01Z T9K_PROGRESS step=10 loss=1")
    await settle()
    streams.sync(KEY, job, pods(pod("job-worker-0", uid="b", started="2026-11-25T12:01:00Z")))
    logs.feed("job-worker-0", "2026-11-25T12:01:01Z T9K_PROGRESS step=3")
    await settle()
    assert logs.opened[-1][1]["sinceTime"] == "2026-11-25T12:01:00Z"  # the new pod's start
    assert streams.report(KEY, "uid-job")["values"] == {"step": 3, "metrics": {"loss": 1}}
    assert streams.active() == 1
    await streams.close()


@pytest.mark.asyncio
async def test_a_replica_restarted_in_place_is_followed_on_its_new_container():
    """The same pod with a new container: the stream on the old one may never end (seen on a real
    kubelet after an in-place restart), so the pass that sees the new container opens it again."""
    streams, logs, _, counts = make(interval=0)
    job = generic("job", ("worker", 1))
    streams.sync(KEY, job, pods(pod("job-worker-0", cid="containerd://one")))
    logs.feed("job-worker-0", "2026-11-25T12:00:01.500Z T9K_PROGRESS step=1")
    await settle()
    streams.sync(KEY, job, pods(pod("job-worker-0", cid="containerd://one")))  # nothing new: the same stream
    await settle()
    assert len(logs.opened) == 1
    streams.sync(KEY, job, pods(pod("job-worker-0", cid="containerd://two", started="2026-11-25T12:00:09Z")))
    logs.feed("job-worker-0", "2026-11-25T12:00:01.500Z T9K_PROGRESS step=1", "2026-11-25T12:00:10Z T9K_PROGRESS step=2")
    await settle()
    assert [q["sinceTime"] for _, q in logs.opened] == ["2026-11-25T12:00:00Z", "2026-11-25T12:00:01Z"]
    assert counts["progress_line"] == 2  # the line read before is skipped
    assert streams.report(KEY, "uid-job")["values"] == {"step": 2}
    assert streams.active() == 1
    await streams.close()


@pytest.mark.asyncio
async def test_a_restart_in_place_slower_than_the_grace_is_followed_on_its_new_container(monkeypatch):
    """A pass that sees the container waiting between the two stops the stream; the new container,
    running only after the grace closed it, still gets a stream (the real node's hang test under load)."""
    monkeypatch.setattr(reports, "GRACE", 0.05)
    streams, logs, _, _ = make(interval=0)
    job = generic("job", ("worker", 1))
    streams.sync(KEY, job, pods(pod("job-worker-0", cid="containerd://one")))
    logs.feed("job-worker-0", "2026-11-25T12:00:01.500Z T9K_PROGRESS step=1")
    await settle()
    streams.sync(KEY, job, pods(pod("job-worker-0", started=None)))  # restarting: no container running
    await asyncio.sleep(0.1)
    assert streams.active() == 0
    streams.sync(KEY, job, pods(pod("job-worker-0", cid="containerd://two", started="2026-11-25T12:00:09Z")))
    logs.feed("job-worker-0", "2026-11-25T12:00:10Z T9K_PROGRESS step=2")
    await settle()
    assert [q["sinceTime"] for _, q in logs.opened] == ["2026-11-25T12:00:00Z", "2026-11-25T12:00:01Z"]
    assert streams.report(KEY, "uid-job")["values"] == {"step": 2}
    assert streams.active() == 1
    await streams.close()


@pytest.mark.asyncio
async def test_the_stream_stops_a_little_after_the_pod_ends_and_a_job_gone_is_forgotten(monkeypatch):
    monkeypatch.setattr(reports, "GRACE", 0.05)
    streams, logs, _, _ = make()
    job = generic("job", ("worker", 1))
    streams.sync(KEY, job, pods(pod("job-worker-0")))
    await settle()
    streams.sync(KEY, job, pods(pod("job-worker-0", phase="Succeeded")))
    logs.feed("job-worker-0", "2026-11-25T12:04:59Z T9K_PROGRESS step=100")  # printed just before the end
    await settle()
    assert streams.active() == 1
    await asyncio.sleep(0.1)
    assert streams.active() == 0
    assert streams.report(KEY, "uid-job")["values"] == {"step": 100}
    streams.sync(KEY, job, pods(pod("job-worker-0", phase="Succeeded")))  # the same ended pod: not opened again
    await settle()
    assert len(logs.opened) == 1
    streams.forget(KEY)
    assert streams.report(KEY, "uid-job") is None


@pytest.mark.asyncio
async def test_a_short_job_whose_pod_ended_before_any_pass_saw_it_run_is_read_once(monkeypatch):
    monkeypatch.setattr(reports, "GRACE", 0.05)
    streams, logs, _, _ = make()
    job = {**generic("job", ("worker", 1)), "status": {"phase": "Pending"}}  # the pass that ends it
    logs.feed("job-worker-0", "2026-11-25T12:00:01Z T9K_PROGRESS step=7 acc=0.9")
    streams.sync(KEY, job, pods(pod("job-worker-0", phase="Succeeded")))
    await asyncio.sleep(0.1)
    assert streams.report(KEY, "uid-job")["values"] == {"step": 7, "metrics": {"acc": 0.9}}
    assert streams.active() == 0


@pytest.mark.asyncio
async def test_a_job_that_had_ended_is_not_read_again_after_a_restart_of_the_controller():
    streams, logs, _, _ = make()
    job = {**generic("job", ("worker", 1)), "status": {"phase": "Succeeded", "progress": {"replica": "job-worker-0", "step": 7}}}
    streams.sync(KEY, job, pods(pod("job-worker-0", phase="Succeeded")))
    await settle()
    assert logs.opened == []
    assert streams.active() == 0


@pytest.mark.asyncio
async def test_a_running_job_is_followed_on_from_what_its_status_records():
    streams, logs, _, _ = make()
    job = {**generic("job", ("worker", 1)),
           "status": {"phase": "Running", "progress": {"replica": "job-worker-0", "step": 40, "totalSteps": 100,
                                                       "metrics": {"loss": 0.5},
                                                       "reportedAt": "2026-11-25T12:30:00Z"}}}  # fmt: skip
    streams.sync(KEY, job, pods(pod("job-worker-0")))
    logs.feed("job-worker-0", "2026-11-25T12:30:05Z T9K_PROGRESS step=41")
    await settle()
    assert logs.opened[0][1]["sinceTime"] == "2026-11-25T12:30:00Z"  # not the pod's start: its log is not read again
    assert streams.report(KEY, "uid-job")["values"] == {"step": 41, "total_steps": 100, "metrics": {"loss": 0.5}}
    await streams.close()


@pytest.mark.asyncio
async def test_a_job_of_the_same_name_starts_from_nothing_and_an_unmanaged_namespace_stops_the_stream():
    streams, logs, _, _ = make()
    job = generic("job", ("worker", 1))
    streams.sync(KEY, job, pods(pod("job-worker-0")))
    logs.feed("job-worker-0", "2026-11-25T12:00:01Z T9K_PROGRESS step=10")
    await settle()
    again = generic("job", ("worker", 1))
    again["metadata"]["uid"] = "uid-other"
    streams.sync(KEY, again, pods(pod("job-worker-0", uid="other-pod")))
    await settle()
    assert streams.report(KEY, "uid-other") is None
    assert streams.active() == 1
    streams.sync(KEY, again, {}, managed=False)
    await settle()
    assert streams.active() == 0


@pytest.mark.asyncio
async def test_at_most_max_streams_are_open():
    streams, logs, _, counts = make(max_streams=2)
    for n in range(3):
        key = ("GenericJob", "ns", f"j{n}")
        streams.sync(key, generic(f"j{n}", ("worker", 1)), pods(pod(f"j{n}-worker-0")))
    await settle()
    assert streams.active() == 2
    assert counts["progress_stream_refused"] == 1
    # Its silence says nothing (hang detection): the controller knows it does not listen.
    assert [streams.refused(("GenericJob", "ns", f"j{n}")) for n in range(3)] == [False, False, True]
    streams.forget(("GenericJob", "ns", "j0"))
    streams.sync(("GenericJob", "ns", "j2"), generic("j2", ("worker", 1)), pods(pod("j2-worker-0")))
    await settle()
    assert streams.active() == 2
    assert not streams.refused(("GenericJob", "ns", "j2"))
    assert [p for p, _ in logs.opened] == ["j0-worker-0", "j1-worker-0", "j2-worker-0"]
    await streams.close()


@pytest.mark.asyncio
async def test_the_stream_cap_is_shared_fairly_between_namespaces():
    """Issue 29, 8: one tenant's many jobs took every stream, and no other namespace's job got
    progress. A namespace under its share now takes one from the namespace holding the most."""
    streams, _logs, queued, counts = make(max_streams=4)

    def sync(ns: str, n: int) -> None:
        name = f"{ns}-j{n}"
        streams.sync(("GenericJob", ns, name), generic(name, ("worker", 1)), pods(pod(f"{name}-worker-0")))

    for n in range(6):
        sync("flood", n)
    await settle()
    assert streams.active() == 4
    assert counts["progress_stream_refused"] == 2
    sync("quiet", 0)
    await settle()
    held = Counter(k[1] for k, s in streams.streams.items() if s.active)
    assert held == {"flood": 3, "quiet": 1}
    assert counts["progress_stream_yielded"] == 1
    sync("other", 0)
    await settle()
    held = Counter(k[1] for k, s in streams.streams.items() if s.active)
    assert held == {"flood": 2, "quiet": 1, "other": 1}  # shares of 1 each (4 // 3), flood gives again
    sync("quiet", 1)  # quiet holds its share: nothing is taken for it
    await settle()
    assert Counter(k[1] for k, s in streams.streams.items() if s.active) == held
    for n in range(6):  # the flood's refused jobs pass again: none takes a stream back
        sync("flood", n)
    await settle()
    assert Counter(k[1] for k, s in streams.streams.items() if s.active) == held
    queued.clear()
    streams.forget(("GenericJob", "other", "other-j0"))  # a stream closes: a waiting job gets a pass
    await settle()
    assert len(queued) == 1
    assert queued[0][1] == "quiet"
    await streams.close()


LOG_POOL_CASES = [
    ("progress off: no pool", 0.0, 200, None),
    ("no stream followed (push only): no pool", 1.0, 0, None),
    ("the default 200 streams: one each, 20 for TokenReviews", 1.0, 200, 220),
    ("past aiohttp's default 100", 5.0, 1000, 1020),
]


@pytest.mark.parametrize(("interval", "streams", "size"), [c[1:] for c in LOG_POOL_CASES],
                         ids=[c[0] for c in LOG_POOL_CASES])  # fmt: skip
def test_the_log_pool_holds_every_followed_stream(interval, streams, size):
    """The controller sizes the log streams' pool from its flags (the pool's bound itself is
    tested against a loopback server in tests/unit/k8s/test_transport.py)."""
    assert log_pool_size(interval, streams) == size


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("ran", "phase", "opens"),
    [
        (0.5, "Running", False),  # just started: waits for one interval
        (8.0, "Running", False),  # (stamps are whole seconds: up to 1 s more)
        (11.0, "Running", True),  # ran an interval: opens, from the container's start
        (0.5, "Succeeded", True),  # ended before the interval: read at once, whole
    ],
)
async def test_a_new_pods_stream_waits_until_its_container_ran_an_interval(ran: float, phase: str, opens: bool):
    from datetime import datetime, timedelta, timezone

    streams, logs, _queued, _ = make(interval=10.0)
    start = (datetime.now(timezone.utc) - timedelta(seconds=ran)).strftime("%Y-%m-%dT%H:%M:%SZ")
    streams.sync(KEY, generic("job", ("worker", 1)), pods(pod("job-worker-0", phase=phase, started=start)))
    await settle()
    assert bool(logs.opened) is opens
    if opens:
        assert logs.opened[0][1]["sinceTime"] == start  # nothing printed before the open is lost
    else:
        assert len(streams._waiting) == 1  # one timer queues the job when the interval is up
    await streams.close()
    assert not streams._waiting


@pytest.mark.asyncio
async def test_the_waiting_pass_queues_the_job_when_the_interval_is_up():
    from datetime import datetime, timezone

    streams, logs, queued, _ = make(interval=0.3)
    start = datetime.now(timezone.utc).isoformat()
    job = generic("job", ("worker", 1))
    streams.sync(KEY, job, pods(pod("job-worker-0", started=start)))
    streams.sync(KEY, job, pods(pod("job-worker-0", started=start)))  # a second pass: still one timer
    assert (logs.opened, queued) == ([], [])
    await asyncio.sleep(0.45)
    assert queued == [KEY]
    streams.sync(KEY, job, pods(pod("job-worker-0", started=start)))  # the pass the timer queued
    await settle()
    assert len(logs.opened) == 1
    await streams.close()
