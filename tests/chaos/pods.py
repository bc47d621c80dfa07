"""Count pod creations from a watch: every ADDED with a new uid is one run of a replica."""

from __future__ import annotations

import threading
from collections import defaultdict

from kubernetes import client, watch


class PodCreations:
    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self.core = core
        self.ns = namespace
        self.uids: dict[str, set[str]] = defaultdict(set)
        self._stop = threading.Event()
        rv = core.list_namespaced_pod(namespace).metadata.resource_version
        self._thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self._thread.start()

    def _run(self, rv: str) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(self.core.list_namespaced_pod, self.ns, resource_version=rv, timeout_seconds=5):
                    pod = ev["object"]
                    rv = pod.metadata.resource_version
                    self.uids[pod.metadata.name].add(pod.metadata.uid)
                    if self._stop.is_set():
                        break
            except Exception:  # the API server may be the thing being killed; keep watching
                self._stop.wait(0.5)
            finally:
                w.stop()

    def count(self, name: str) -> int:
        return len(self.uids.get(name, ()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
