"""The shared watch hands each subscriber only what it asked for."""

from __future__ import annotations

import pytest

from airflow_t9k.triggers.job import T9kJobTrigger
from airflow_t9k.triggers.shared_watch import SharedWatch


def event(name: str, involved: str) -> dict:
    return {"metadata": {"name": name, "uid": name}, "involvedObject": {"name": involved}}


@pytest.mark.asyncio
async def test_matching_subscribers_get_only_their_objects_and_name_subscribers_are_woken():
    watch = SharedWatch(hook=None, path="/api/v1/namespaces/ns/events", kind="Event")  # type: ignore[arg-type]
    mine = T9kJobTrigger(kind="GenericJob", name="train-abc", namespace="ns")
    theirs = T9kJobTrigger(kind="GenericJob", name="eval-def", namespace="ns")
    q_mine = watch.subscribe_matching(mine._about_this_job)
    q_theirs = watch.subscribe_matching(theirs._about_this_job)
    woken = watch.subscribe("e2")
    watch._on_event("ADDED", event("e1", "train-abc"))
    watch._on_event("ADDED", event("e2", "train-abc-worker-0"))
    watch._on_event("ADDED", event("e3", "eval-def-worker-1"))
    watch._on_event("ADDED", event("e4", "train-abcd-worker-0"))  # another job whose name only starts alike
    watch._on_event("DELETED", event("e5", "train-abc"))  # an Event expiring is not news
    assert [q_mine.get_nowait()["metadata"]["name"] for _ in range(q_mine.qsize())] == ["e1", "e2"]
    assert [q_theirs.get_nowait()["metadata"]["name"] for _ in range(q_theirs.qsize())] == ["e3"]
    assert woken.is_set()
    watch.unsubscribe_matching(q_mine)
    watch._on_event("ADDED", event("e6", "train-abc"))
    assert q_mine.empty()
    assert watch.matchers == {q_theirs: theirs._about_this_job}


def test_unsubscribing_thousands_of_matching_subscribers_is_linear():
    # A triggerer with 5,000 deferred jobs unsubscribes 5,000 Event forwarders as they end; a
    # cost per unsubscribe that grows with the subscribers blocked its loop for seconds
    # (benchmarks/triggerer_watch.py). Here: about 20 s of CPU when quadratic, milliseconds when not.
    import time

    watch = SharedWatch(hook=None, path="/api/v1/namespaces/ns/events", kind="Event")  # type: ignore[arg-type]
    queues = [watch.subscribe_matching(lambda ev: True) for _ in range(5_000)]
    start = time.process_time()
    for q in queues[:-1]:
        watch.unsubscribe_matching(q)
    assert time.process_time() - start < 1.0
    watch._on_event("ADDED", event("e1", "any"))
    assert queues[-1].qsize() == 1
    assert all(q.empty() for q in queues[:-1])
