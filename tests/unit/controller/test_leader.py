"""Leader election rules, on a Lease store with the API server's optimistic concurrency.

The store stands in for one object's get/create/update (resourceVersion checks included);
the election's behaviour against the real API server is in tests/chaos/test_leader_election.py.
"""

from __future__ import annotations

import asyncio
import copy
import time

import pytest

from airflow_t9k.controller.leader import LeaderElector
from airflow_t9k.k8s.errors import AlreadyExists, Conflict, NotFound

PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lock"


class LeaseStore:
    def __init__(self) -> None:
        self.obj: dict | None = None
        self.rv = 0
        self.down = False  # the API server unreachable: every call fails
        self.writes: list[str] = []  # holder written by each successful write

    def _check(self) -> None:
        if self.down:
            raise ConnectionRefusedError("connection refused")

    async def get(self, path, **_):
        self._check()
        if self.obj is None:
            raise NotFound(404, "NotFound", "leases.coordination.k8s.io lock not found")
        return copy.deepcopy(self.obj)

    async def create(self, path, *, body):
        self._check()
        if self.obj is not None:
            raise AlreadyExists(409, "AlreadyExists", "exists")
        return self._write(body)

    async def replace(self, path, *, body):
        self._check()
        if str(body["metadata"].get("resourceVersion")) != str(self.rv):
            raise Conflict(409, "Conflict", "the object has been modified")
        return self._write(body)

    def _write(self, body):
        self.rv += 1
        self.obj = copy.deepcopy(body)
        self.obj["metadata"]["resourceVersion"] = str(self.rv)
        self.writes.append(body["spec"]["holderIdentity"])
        return copy.deepcopy(self.obj)


def elector(store, identity, **kw) -> LeaderElector:
    timing = {"lease_duration": 0.8, "renew_deadline": 0.5, "retry_period": 0.1, **kw}
    return LeaderElector(store, "ns", "lock", identity, **timing)  # type: ignore[arg-type]


async def until(check, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(("duration", "deadline", "retry"), [(10, 10, 1), (10, 12, 1), (10, 7, 7), (10, 7, 0)])
def test_timings_must_leave_the_old_leader_time_to_stop(duration, deadline, retry):
    with pytest.raises(ValueError, match="lease duration > renew deadline"):
        elector(LeaseStore(), "a", lease_duration=duration, renew_deadline=deadline, retry_period=retry)


@pytest.mark.asyncio
async def test_one_leader_renewing_keeps_the_other_out_and_a_dead_one_is_replaced_after_a_lease_duration():
    store = LeaseStore()
    a, b = elector(store, "a"), elector(store, "b")
    ta = asyncio.create_task(a.run())
    await until(lambda: a.valid())
    tb = asyncio.create_task(b.run())
    await asyncio.sleep(1.5)  # two lease durations: a renews all along, so b never gets in
    assert a.valid()
    assert not b.leading
    assert set(store.writes) == {"a"}
    assert store.obj["spec"]["leaseDurationSeconds"] == 1
    assert store.obj["spec"]["leaseTransitions"] == 0
    ta.cancel()  # a dies without releasing
    died = time.monotonic()
    await until(lambda: b.valid())
    took = time.monotonic() - died
    assert 0.8 - 0.1 <= took <= 0.8 + 3 * 0.12 + 0.2  # a lease duration after a's last renewal, give or take a retry
    assert store.obj["spec"]["holderIdentity"] == "b"
    assert store.obj["spec"]["leaseTransitions"] == 1
    tb.cancel()
    await asyncio.gather(ta, tb, return_exceptions=True)


@pytest.mark.asyncio
async def test_a_leader_cut_off_from_the_api_stops_before_anyone_can_take_over():
    store = LeaseStore()
    a = elector(store, "a")
    ta = asyncio.create_task(a.run())
    await until(lambda: a.valid())
    renewed = a.renewed_at
    store.down = True  # partitioned: a cannot renew, nor anyone reach the API yet
    await until(lambda: a.lost.is_set(), timeout=2)
    stopped = time.monotonic()
    assert not a.valid()
    assert not a.leading
    # It stopped by its renew deadline, before the lease duration after which another may take over.
    assert stopped - renewed <= 0.5 + 0.15 < 0.8
    store.down = False
    b = elector(store, "b")
    tb = asyncio.create_task(b.run())
    # a comes back first (it is still the recorded holder) or b does after a lease duration: never both.
    for _ in range(150):
        assert not (a.valid() and b.valid())
        await asyncio.sleep(0.01)
    assert a.valid() != b.valid()
    for t in (ta, tb):
        t.cancel()
    await asyncio.gather(ta, tb, return_exceptions=True)


@pytest.mark.asyncio
async def test_a_paused_leader_is_invalid_the_moment_it_wakes():
    """A process stopped past its deadline (SIGSTOP) must not write before its loop notices."""
    now = {"t": 100.0}
    a = LeaderElector(LeaseStore(), "ns", "lock", "a", lease_duration=10, renew_deadline=7, retry_period=1.5,
                      clock=lambda: now["t"])  # type: ignore[arg-type]  # fmt: skip
    assert await a.try_acquire_or_renew()
    a.renewed_at, a.leading = now["t"], True
    now["t"] += 6.9
    assert a.valid()
    now["t"] += 0.2  # woke up past the renew deadline: no renewal has run yet
    assert not a.valid()


@pytest.mark.asyncio
async def test_release_hands_over_at_once():
    store = LeaseStore()
    a, b = elector(store, "a", lease_duration=5, renew_deadline=3), elector(store, "b", lease_duration=5, renew_deadline=3)
    ta = asyncio.create_task(a.run())
    await until(lambda: a.valid())
    tb = asyncio.create_task(b.run())
    await asyncio.sleep(0.3)
    assert not b.leading
    ta.cancel()
    await asyncio.gather(ta, return_exceptions=True)
    await a.release()
    assert store.obj["spec"]["holderIdentity"] == ""
    released = time.monotonic()
    await until(lambda: b.valid(), timeout=2)
    assert time.monotonic() - released < 1.0  # not the 5 s lease duration
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)


@pytest.mark.asyncio
async def test_lost_and_regained_when_still_the_holder():
    """An API outage longer than the renew deadline: the leader stops, then takes its own lease
    back as soon as the API answers (nobody else could have taken it meanwhile)."""
    store = LeaseStore()
    changes: list[bool] = []
    a = LeaderElector(store, "ns", "lock", "a", lease_duration=0.8, renew_deadline=0.5, retry_period=0.1,
                      on_change=changes.append)  # type: ignore[arg-type]  # fmt: skip
    ta = asyncio.create_task(a.run())
    await until(lambda: a.valid())
    store.down = True
    await until(lambda: a.lost.is_set())
    store.down = False
    back = time.monotonic()
    await until(lambda: a.valid())
    assert time.monotonic() - back < 0.5
    assert changes == [True, False, True]
    ta.cancel()
    await asyncio.gather(ta, return_exceptions=True)
