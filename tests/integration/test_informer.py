"""The informer against a real API server: list, label filter, watch, resume.

The 410 relist path is in tests/unit/controller/test_informer_gone.py (a real API server
with an unconsolidated watch cache replays old resourceVersions instead of answering 410)."""

from __future__ import annotations

import asyncio

import pytest

from airflow_t9k.api.paths import child_path
from airflow_t9k.k8s.client import Kube, load_api_client
from airflow_t9k.k8s.informer import Informer


async def _until(check, timeout=20.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.asyncio
async def test_informer_lists_watches_and_resumes_without_relisting(cluster, namespace):
    kube = Kube(await load_api_client(str(cluster.kubeconfig)))
    seen: list[tuple[str, str]] = []
    informer = Informer(kube, child_path("ConfigMap", namespace), kind="ConfigMap",
                        label_selector="t=1", handler=lambda e, o: seen.append((e, o["metadata"]["name"])),
                        watch_timeout=1)  # fmt: skip
    path = child_path("ConfigMap", namespace)
    await kube.create(path, body={"metadata": {"name": "before", "labels": {"t": "1"}}})
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 20)
        assert ("ADDED", "before") in seen
        assert informer.lists == 1

        await kube.create(path, body={"metadata": {"name": "watched", "labels": {"t": "1"}}})
        await kube.create(path, body={"metadata": {"name": "other-label", "labels": {"t": "2"}}})
        await _until(lambda: (namespace, "watched") in informer.cache)
        assert (namespace, "other-label") not in informer.cache

        # Watches end every second here (watch_timeout=1) and resume from the last
        # resourceVersion: nothing is missed across the reconnects, and no relist happens.
        await asyncio.sleep(2.5)
        await kube.delete(child_path("ConfigMap", namespace, "before"))
        await kube.create(path, body={"metadata": {"name": "after-relist", "labels": {"t": "1"}}})
        await _until(lambda: (namespace, "after-relist") in informer.cache and (namespace, "before") not in informer.cache)
        assert ("DELETED", "before") in seen
        assert informer.lists == 1
        assert informer.healthy
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()
