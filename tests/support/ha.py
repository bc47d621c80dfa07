"""Helpers for the failover and outage tests: who leads, and every pod ever created."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kubernetes import client, watch

if TYPE_CHECKING:
    from tests.support.controller import ControllerProcess


MARKER = "t9k-watch-marker-"


def leader_flags(namespace: str, lease: str) -> tuple[str, ...]:
    return ("--leader-elect", "--leader-election-namespace", namespace, "--leader-election-id", lease)


def leads(ctrl: ControllerProcess, lease: str) -> bool:
    try:
        return ctrl.metrics().get(f'leader_election_master_status{{name="{lease}"}}') == 1
    except OSError:  # not answering (stopped, or killed)
        return False


def generic(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": replicas,
                                       "template": {"spec": {"containers": [{"name": "main",
                                                                             "image": "busybox"}]}}}]}}  # fmt: skip


class PodCreations:
    """Every pod created in a namespace, from a watch that starts before the test acts.

    A name seen with two UIDs was created twice; the jobs these tests run never fail, so
    nothing is ever legitimately recreated.
    """

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self.core = core
        self.ns = namespace
        self.uids: dict[str, set[str]] = defaultdict(set)
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        rv = core.list_namespaced_pod(namespace).metadata.resource_version
        self.markers: set[str] = set()
        self.thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self.thread.start()

    def _run(self, rv: str) -> None:
        while not self.stopped.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(self.core.list_namespaced_pod, self.ns, resource_version=rv, timeout_seconds=5,
                                   allow_watch_bookmarks=True):  # fmt: skip
                    obj = ev["object"]
                    rv = obj.metadata.resource_version or rv
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._saw(obj)
                    if self.stopped.is_set():
                        break
            except client.ApiException as exc:
                if exc.status == 410:  # too old: what exists now is what was created meanwhile
                    pods = self.core.list_namespaced_pod(self.ns)
                    for p in pods.items:
                        self._saw(p)
                    rv = pods.metadata.resource_version
                time.sleep(0.5)
            except Exception:  # noqa: BLE001 - the API server restarting under the outage test: watch again
                time.sleep(0.5)

    def _saw(self, pod: Any) -> None:
        with self.lock:
            if pod.metadata.name.startswith(MARKER):
                self.markers.add(pod.metadata.name)
            else:
                self.uids[pod.metadata.name].add(pod.metadata.uid)

    def caught_up(self, timeout: float = 20) -> None:
        """Wait until the watch has delivered every pod event up to now. It runs in its own
        thread and can trail the API server by seconds on a loaded machine (CI once counted 31
        of 36 pods that all existed), so counts taken before this are short by events in flight.
        A marker pod is written and waited for: events arrive in order, so once its ADDED is in,
        so is everything before it. It names a node that does not exist, so nothing runs it, and
        the counts leave it out."""
        name = f"{MARKER}{uuid.uuid4().hex[:8]}"
        body = {"metadata": {"name": name}, "spec": {"nodeName": "t9k-no-such-node",
                                                     "containers": [{"name": "m", "image": "none"}]}}  # fmt: skip
        self.core.create_namespaced_pod(self.ns, body)
        try:
            deadline = time.monotonic() + timeout
            while True:
                with self.lock:
                    if name in self.markers:
                        return
                if time.monotonic() > deadline:
                    raise AssertionError(f"the pod watch did not deliver {name} within {timeout} s")
                time.sleep(0.1)
        finally:
            self.core.delete_namespaced_pod(name, self.ns, grace_period_seconds=0)

    def count(self, name: str) -> int:
        """How often a pod of this name was created (runs of that replica)."""
        with self.lock:
            return len(self.uids.get(name, ()))

    def created(self) -> int:
        with self.lock:
            return sum(len(u) for u in self.uids.values())

    def duplicates(self) -> dict[str, set[str]]:
        with self.lock:
            return {n: set(u) for n, u in self.uids.items() if len(u) > 1}

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)
