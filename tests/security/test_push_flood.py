"""A flood of the progress endpoint (issue 45, item 1): every pod can reach it, and with aiohttp's
own listener 4,000 TCP connections that never sent a byte grew the controller from 58 to 265 MB
(a TLS handshake holds some 300 KB for up to 60 s): a few thousand more from any pod, opened
again every minute, kept both replicas OOM-killed at the chart's 512Mi.

Here 4,000 connections come from 250 addresses of the loopback range (as from many pods), open
at once and never send a byte. The controller's memory grows by less than 100 MB, a job created
meanwhile reaches Succeeded (reconciliation goes on), the endpoint closes every one of them
within 30 s, and once they are gone a replica's push is taken again. The listener's figures
(refused, failed handshakes) are the controller's metrics."""

from __future__ import annotations

import contextlib
import resource
import selectors
import socket
import threading
import time

from tests.builders import generic
from tests.support.cluster import wait_until
from tests.support.push import CA_ANNOTATION, FROM_HERE, env_of, post, push_flags, token

GJ = "GenericJob"
CONNECTIONS = 4000
SOURCES = 250  # 127.0.1.1 to 127.0.1.250: 16 connections from each, under the per-source cap of 32


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _open_idle(port: int, n: int) -> list[socket.socket]:
    """``n`` connections to the endpoint, from SOURCES loopback addresses, that never send."""
    socks = []
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.0.1.{1 + i % SOURCES}", 0))
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError, ConnectionRefusedError, OSError):
            s.connect(("127.0.0.1", port))
        socks.append(s)
        if i % 500 == 499:  # a burst a second, so the kernel's accept queue never overflows on a loaded machine
            time.sleep(0.1)
    return socks


def _closed_by_peer(socks: list[socket.socket], within: float) -> tuple[int, float]:
    """How many the peer closed (EOF or reset) within ``within`` seconds, and when the last was."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed, last, start = 0, 0.0, time.monotonic()
    while closed < len(socks) and time.monotonic() - start < within:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                data = s.recv(1)  # type: ignore[union-attr]
            except (ConnectionResetError, OSError):
                data = b""
            if not data:
                sel.unregister(s)
                closed += 1
                last = time.monotonic() - start
    sel.close()
    return closed, last


def test_4000_idle_connections_neither_take_the_memory_nor_stop_reconciliation(cluster, core, jobs, controller_factory, request):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= CONNECTIONS + 500, f"this test opens {CONNECTIONS} sockets: the hard limit on open files is {hard}"
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port, flags = push_flags(check_source=not cluster.external)
    controller = controller_factory("--progress-interval", "1", *flags)
    pid = controller.pid
    time.sleep(1)
    before = _rss_mb(pid)

    peak = [before]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], _rss_mb(pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    socks = _open_idle(port, CONNECTIONS)
    try:
        opened_at = time.monotonic()
        during = generic("during", ("worker", 1))
        during["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"annotations": {"sim.t9k.test/duration": "2s"}}
        jobs.create(during)
        done = jobs.wait_phase(GJ, "during", "Succeeded", "Failed", timeout=60)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        reconciled_in = time.monotonic() - opened_at
        closed, last = _closed_by_peer(socks, within=30)
    finally:
        sampling.set()
        sampler.join(5)
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    metrics = controller.metrics()
    refused = sum(v for k, v in metrics.items() if k.startswith("progress_push_connection_refused"))
    failed = metrics.get("progress_push_handshake_failed", 0)
    line = (f"{CONNECTIONS} idle connections from {SOURCES} addresses: rss {before:.0f} -> peak {peak[0]:.0f} MB "
            f"(+{peak[0] - before:.0f}); refused at accept {refused:.0f}, handshakes timed out {failed:.0f}; all closed "
            f"by the server after {last:.1f}s; a job Succeeded {reconciled_in:.1f}s after the flood began")  # fmt: skip
    request.node.user_properties.append(("figures", f"{request.node.name}: {line}"))  # printed at the end of the run
    print(f"\n[flood] {line}")
    assert peak[0] - before < 100, (before, peak[0])
    assert closed == CONNECTIONS, f"the server closed {closed} of {CONNECTIONS} connections within 30 s"
    assert refused + failed >= CONNECTIONS - 5, metrics  # each was refused at once or timed out in its handshake

    # The flood gone, a replica pushes again.
    job = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": "after"},
           "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": {
               **FROM_HERE, "containers": [{"name": "main", "image": "busybox"}]}}}]}}  # fmt: skip
    jobs.create(job)
    jobs.wait_phase(GJ, "after", "Running")
    pod = jobs.live_pods("after")["after-worker-0"]
    url, ca, bearer = env_of(pod)["T9K_PROGRESS_URL"], pod.metadata.annotations[CA_ANNOTATION], token(core, jobs.ns, pod)
    _, answer = wait_until(lambda: (r := post(url, bearer, {"step": 1}, ca))[0] == 200 and r, timeout=20, interval=1,
                           what="a push taken after the flood")  # fmt: skip
    assert answer["accepted"] == {"step": 1}
