"""The informer's back-off after failures: short, jittered, and honest about Retry-After."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from airflow_t9k.k8s.errors import ApiError, from_response
from airflow_t9k.k8s.informer import Backoff, Informer, needs_relist, retry_after
from tests.unit.k8s.test_informer_gone import PATH, fake_api, run_informer, stop


@pytest.mark.parametrize(
    ("rand", "failures", "hint", "expected"),
    [
        (1.0, 0, None, 0.2),  # first retry is quick
        (0.0, 0, None, 0.1),  # jitter: down to half the ceiling
        (1.0, 3, None, 1.6),
        (1.0, 10, None, 5.0),  # capped: an outage never leaves a 30 s sleep behind
        (1.0, 40, None, 5.0),  # no overflow after a very long outage
        (0.0, 0, 2.0, 2.0),  # the server's Retry-After is honoured...
        (1.0, 0, 2.0, 2.4),  # ...give or take a fifth
        (1.0, 0, 30.0, 5.0),  # ...but capped too
        (0.0, 9, 1.0, 1.0),  # after a long outage, a 429 saying "1 s" means 1 s, not the grown back-off
        (1.0, 1000, None, 5.0),  # no overflow however long it lasts
    ],
)
def test_backoff_table(rand, failures, hint, expected):
    b = Backoff(rand=lambda: rand)
    b.failures = failures
    assert b.next(hint) == pytest.approx(expected)
    assert b.failures == failures + 1


def test_backoff_resets():
    b = Backoff(rand=lambda: 1.0)
    for _ in range(8):
        b.next()
    b.reset()
    assert b.next() == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("status", "body", "relist", "after"),
    [
        (
            429,
            '{"reason":"TooManyRequests","message":"storage is (re)initializing","details":{"retryAfterSeconds":1}}',
            False,
            1.0,
        ),
        (
            504,
            (
                '{"reason":"Timeout","message":"Timeout: Too large resource version: 900, current: 850",'
                '"details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],'
                '"retryAfterSeconds":1}}'
            ),
            True,
            1.0,
        ),
        (500, '{"message":"boom"}', False, None),
        (503, "not json", False, None),
    ],
)
def test_error_classification(status, body, relist, after):
    exc = from_response(status, body)
    assert needs_relist(exc) is relist
    assert retry_after(exc) == after


def test_plain_exceptions_neither_relist_nor_hint():
    assert not needs_relist(ConnectionResetError())
    assert retry_after(ConnectionResetError()) is None
    assert not needs_relist(ApiError(500, "", "x"))


@pytest.mark.asyncio
async def test_429_while_storage_initializes_is_retried_within_a_second_and_recovery_is_reported():
    """A restarted API server answers 429 for a moment: the informer must not sleep 30 s."""
    calls = {"list": 0, "watch": 0}
    release = asyncio.Event()
    recovered: list[float] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            calls["list"] += 1
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": []})
        calls["watch"] += 1
        if calls["watch"] <= 4:
            return web.json_response({"kind": "Status", "code": 429, "reason": "TooManyRequests",
                                      "message": "storage is (re)initializing", "details": {"retryAfterSeconds": 1}},
                                     status=429)  # fmt: skip
        resp = web.StreamResponse()
        await resp.prepare(request)
        await release.wait()
        return resp

    async with fake_api(handle) as kube:
        informer = Informer(kube, PATH, kind="ConfigMap", on_recovered=lambda: recovered.append(time.monotonic()))
        t0 = time.monotonic()
        task = await run_informer(informer, lambda: bool(recovered))
        for _ in range(300):  # run_informer waits 4 s at most; four hinted waits may need more
            if recovered:
                break
            await asyncio.sleep(0.02)
        release.set()
        await stop(task)
    assert calls["watch"] == 5
    assert calls["list"] == 1
    # At most 4 x 1.2 s of back-off; doubling from 0.5 s (the old way) took 7.5 s.
    assert recovered
    assert recovered[0] - t0 < 5.5
    assert informer.healthy


@pytest.mark.asyncio
async def test_too_large_resource_version_lists_again():
    calls = {"list": 0, "watch": 0}
    release = asyncio.Event()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            calls["list"] += 1
            return web.json_response({"metadata": {"resourceVersion": str(calls["list"] * 100)}, "items": []})
        calls["watch"] += 1
        if calls["watch"] == 1:
            return web.json_response({"kind": "Status", "code": 504, "reason": "Timeout",
                                      "message": "Timeout: Too large resource version: 100, current: 50",
                                      "details": {"causes": [{"reason": "ResourceVersionTooLarge"}]}}, status=504)  # fmt: skip
        resp = web.StreamResponse()
        await resp.prepare(request)
        await release.wait()
        return resp

    async with fake_api(handle) as kube:
        informer = Informer(kube, PATH, kind="ConfigMap")
        task = await run_informer(informer, lambda: calls["watch"] >= 2)
        release.set()
        await stop(task)
    assert calls["list"] == 2
    assert informer.resource_version == "200"


@pytest.mark.asyncio
async def test_a_quiet_watch_is_opened_again_without_counting_as_a_failure():
    """Accepted, then not a byte: the API server sends no bookmark on a kind its watch cache has
    seen no event for. The watch is opened again from the same resourceVersion at once, and it is
    no failure: the informer stays healthy (so /readyz stays 200), nothing is listed again and no
    job is requeued by a recovery."""
    watches: list[tuple[str, bool]] = []  # (resourceVersion asked, healthy when asked)
    release = asyncio.Event()
    recovered: list[int] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "7"}, "items": []})
        watches.append((request.query["resourceVersion"], informer.healthy))
        resp = web.StreamResponse()
        await resp.prepare(request)
        await release.wait()  # open, and never a byte
        return resp

    async with fake_api(handle) as kube:
        # 1 s: each watch's headers must come within it (0.3 s could pass on a busy CI host).
        informer = Informer(kube, PATH, kind="ConfigMap", idle_timeout=1.0, on_recovered=lambda: recovered.append(1))
        task = await run_informer(informer, lambda: len(watches) >= 3)
        healthy_after = informer.healthy
        release.set()
        await stop(task)
    assert len(watches) >= 3
    assert {rv for rv, _ in watches} == {"7"}
    assert all(healthy for _, healthy in watches)
    assert healthy_after
    assert informer.lists == 1
    assert informer.backoff.failures == 0
    assert recovered == []


@pytest.mark.asyncio
async def test_a_watch_never_accepted_is_a_failure_until_one_is():
    """No answer at all (a vanished API server host sends no reset): that is a failure, with
    back-off, until a watch is accepted again, which counts as a recovery (jobs looked at again)."""
    watches: list[bool] = []  # healthy when each watch was asked for
    release = asyncio.Event()
    recovered: list[int] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "7"}, "items": []})
        watches.append(informer.healthy)
        if len(watches) <= 2:
            await release.wait()  # no status line, no headers
        resp = web.StreamResponse()
        await resp.prepare(request)
        await release.wait()
        return resp

    async with fake_api(handle) as kube:
        informer = Informer(kube, PATH, kind="ConfigMap", idle_timeout=0.3, on_recovered=lambda: recovered.append(1))
        task = await run_informer(informer, lambda: bool(recovered))
        release.set()
        await stop(task)
    assert watches[:3] == [True, False, False]  # failing from the first unanswered one until one is accepted
    assert recovered == [1]
    assert informer.healthy
    assert informer.lists == 1
