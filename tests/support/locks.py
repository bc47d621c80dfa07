"""Locks between the processes that share one cluster: the workers of a parallel run
(pytest-xdist), and any other test run on the same cluster.

- ``start``: one process starts the local cluster (or Kueue); the others wait and find it up.
- ``cluster_share``: every integration test holds the cluster shared; a ``serial`` test holds it
  alone. A turnstile in front keeps a waiting serial test from being starved by the stream of
  shared holders: once it waits, no new test enters until it has run.
- ``real_node``: one real-node test at a time (the node has 2 CPUs; two trainings at once leave
  pods Pending).

They are ``flock`` locks on files in the temporary directory, one set per cluster (named after
its kubeconfig's path), so they vanish with the processes that held them: a killed test leaves
no stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def lock_dir(kubeconfig: Path) -> Path:
    key = hashlib.sha256(str(kubeconfig.resolve()).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"airflow-t9k-test-locks-{key}"
    path.mkdir(exist_ok=True)
    return path


@contextlib.contextmanager
def file_lock(path: Path, shared: bool = False) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


def start(kubeconfig: Path) -> contextlib.AbstractContextManager[None]:
    return file_lock(lock_dir(kubeconfig) / "start.lock")


@contextlib.contextmanager
def cluster_share(kubeconfig: Path, alone: bool) -> Iterator[None]:
    d = lock_dir(kubeconfig)
    if alone:
        # Holding the turnstile stops new tests from entering while this one waits and runs.
        with file_lock(d / "turnstile.lock"), file_lock(d / "cluster.lock"):
            yield
        return
    fd = os.open(d / "cluster.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with file_lock(d / "turnstile.lock"):
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def real_node(kubeconfig: Path) -> contextlib.AbstractContextManager[None]:
    return file_lock(lock_dir(kubeconfig) / "real-node.lock")
