"""Attack: anyone who may create ConfigMaps puts the controller's label on hundreds of large
ConfigMaps, to crash-loop the controller: its list read them whole before filtering, and a page
of 500 was one answer of hundreds of MB (issue 29, 3). (No forged ownerReference: the garbage
collector deletes an object whose only owner does not exist within seconds.)

The flood sits in a namespace the controller does not manage. With --namespace-selector the
controller watches children only in the namespaces it manages; without one (the flood's
namespace excluded by name) it still lists them, but reads only their metadata, twenty to an
answer. Either way its peak memory (VmHWM) stays near where it was without the flood, and a job
in a managed namespace runs meanwhile."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kubernetes import client

from tests.builders import generic
from tests.support.cluster import wait_until

pytestmark = pytest.mark.serial

COUNT = 150
SIZE = 1_000_000  # a ConfigMap holds at most 1 MiB
# What a controller may take beyond its peak without the flood: the flood itself is 150 MB.
ALLOWED_GROWTH_KB = 60_000


def _kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


@pytest.fixture(scope="module")
def flood(core) -> Iterator[str]:
    """A namespace holding COUNT ConfigMaps of SIZE bytes with our label."""
    ns = f"t9k-flood-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels={"airflow-t9k/test": "true"})))
    blob = "x" * SIZE

    def make(n: int) -> None:
        core.create_namespaced_config_map(ns, {
            "metadata": {"name": f"flood-{n}", "labels": {"app.kubernetes.io/managed-by": "airflow-t9k"}},
            "data": {"d": blob}})  # fmt: skip

    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(make, range(COUNT)))
        assert len(core.list_namespaced_config_map(ns, label_selector="app.kubernetes.io/managed-by=airflow-t9k").items) == COUNT
        yield ns
    finally:
        core.delete_namespace(ns, propagation_policy="Background")


def _baseline_hwm(controller_factory, *args: str) -> int:
    """The peak memory of a controller started with ``args`` over a namespace without the flood."""
    proc = controller_factory(*args)
    hwm = _kb(proc.pid, "VmHWM")
    proc.stop()
    return hwm


def _serves(jobs, name: str) -> None:
    jobs.create(generic(name, ("worker", 2)))
    wait_until(lambda: len(jobs.live_pods(name)) == 2, timeout=30, what=f"{name}'s pods")


@pytest.mark.parametrize("mode", ["selector", "excluded"])
def test_a_configmap_flood_in_an_unmanaged_namespace_leaves_the_controller_flat_and_serving(
    core, jobs, namespace, flood, controller_factory, mode
):
    key = f"sec-{uuid.uuid4().hex[:6]}.airflow-t9k.io/jobs"
    core.patch_namespace(namespace, {"metadata": {"labels": {key: "enabled"}}})
    args = ["--namespace-selector", f"{key}=enabled"] if mode == "selector" else ["--exclude-namespace", flood]
    before = _baseline_hwm(controller_factory, *args)
    proc = controller_factory("-n", flood, *args)  # the flood's namespace is one it would otherwise watch
    _serves(jobs, f"ok-{mode}")
    hwm, rss = _kb(proc.pid, "VmHWM"), _kb(proc.pid, "VmRSS")
    print(f"\n{mode}: VmHWM {before} kB without the flood, {hwm} kB with {COUNT} x {SIZE // 1000} kB ConfigMaps; VmRSS {rss} kB")
    assert hwm - before < ALLOWED_GROWTH_KB, (mode, before, hwm, rss)
    assert proc.probe("/readyz") == 200
