"""Informer.remember: what one of our writes returned is cached unless the watch has passed it."""

from __future__ import annotations

import pytest

from airflow_t9k.k8s.informer import Informer


def pod(rv: str | None, phase: str = "Pending") -> dict:
    meta = {"name": "p", "namespace": "ns", "uid": "u"}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {"kind": "Pod", "metadata": meta, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("watch_rv", "cached", "answer", "kept", "expected_phase"),
    [
        # the watch has not reached the answer yet: cache it (the next pass must see our write)
        ("4", None, pod("5"), True, "Pending"),
        ("", None, pod("5"), True, "Pending"),  # before the first list
        ("4", pod("3", "Running"), pod("5", "Failed"), True, "Failed"),
        # the watch delivered it, or later events (here: the pod's deletion): leave the cache be
        ("5", None, pod("5"), False, None),
        ("7", None, pod("5"), False, None),
        ("7", pod("6", "Running"), pod("5", "Failed"), False, "Running"),
        # no version to compare: cached (newer-wins still applies against what is there)
        ("7", None, pod(None), True, "Pending"),
    ],
)
def test_remember(watch_rv, cached, answer, kept, expected_phase):
    informer = Informer(None, "/api/v1/pods", kind="Pod")  # type: ignore[arg-type]
    informer.resource_version = watch_rv
    if cached is not None:
        informer.cache[("ns", "p")] = cached
    assert informer.remember(answer) is kept
    got = informer.get(("ns", "p"))
    assert (got and got["status"]["phase"]) == expected_phase
