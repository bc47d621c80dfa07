"""/healthz, /readyz and /metrics as served, the metric names, and the write fence.

The HTTP parts run the controller's own server on loopback, asked by a real HTTP client; the
API server side is an aiohttp fake that only records what reaches it (no controller logic is
faked)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client
from prometheus_client import generate_latest

from airflow_t9k.controller.metrics import InstrumentedKube, Metrics, NotLeader, resource_of
from airflow_t9k.controller.runner import Controller, Settings
from airflow_t9k.controller.serve import HEAD_LIMIT, serve
from airflow_t9k.k8s.client import Kube
from tests.support.controller import parse_metrics


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/namespaces/ns/pods", "pods"),
        ("/api/v1/namespaces/ns/pods/p-0", "pods"),
        ("/api/v1/namespaces/ns/pods/p-0/status", "pods/status"),
        ("/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/genericjobs/j/status", "genericjobs/status"),
        ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/airflow-t9k-controller", "leases"),
        ("/api/v1/namespaces/ns/events?x=1", "events"),
        ("/api/v1/namespaces", "namespaces"),
        ("/api/v1/namespaces/ns", "namespaces"),
        ("/api/v1/namespaces/ns/status", "namespaces/status"),
        ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x", "customresourcedefinitions"),
        ("/", "unknown"),
    ],
)
def test_resource_of(path, resource):
    assert resource_of(path) == resource


class Http:
    """GETs (or any method) to one of the controller's listeners: (status, headers, text)."""

    def __init__(self, session: aiohttp.ClientSession, port: int) -> None:
        self.session, self.port = session, port

    async def get(self, path: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
        async with self.session.request(method, f"http://127.0.0.1:{self.port}{path}") as r:
            return r.status, dict(r.headers), await r.text()


@contextlib.asynccontextmanager
async def served(controller: Controller) -> AsyncIterator[Http]:
    listener = await serve(controller, "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            yield Http(session, listener.port)
    finally:
        await listener.cleanup()


def offline_controller(workers: int = 2) -> Controller:
    """A controller that has not run: no request is made until run()."""
    kube = Kube(k8s_client.ApiClient(k8s_client.Configuration(host="http://127.0.0.1:9")))
    return Controller(kube, Settings(namespaces=["ns"], workers=workers, kinds=["GenericJob"]))


@pytest.mark.asyncio
async def test_liveness_does_not_depend_on_the_caches_readiness_does():
    controller = offline_controller()
    async with served(controller) as http:
        for path in ("/healthz", "/livez"):
            assert (await http.get(path))[0] == 200  # alive, though nothing has synced
        status, _, text = await http.get("/readyz")
        assert status == 503
        assert "GenericJob/ns: not synced" in text
        assert "Pod/ns: not synced" in text
        for informer in controller.informers.values():
            informer.synced.set()
        controller.informers[("Pod", "ns")].healthy = False  # a watch failing after the sync
        status, _, text = await http.get("/readyz")
        assert status == 503
        assert text.strip().endswith("Pod/ns: failing")
        assert (await http.get("/healthz"))[0] == 200
        controller.informers[("Pod", "ns")].healthy = True
        status, _, text = await http.get("/readyz")
        assert (status, text) == (200, "ok\n")
    await controller.kube.close()


@pytest.mark.asyncio
async def test_metrics_keep_our_counters_and_add_controller_runtime_names():
    controller = offline_controller(workers=3)
    controller.metrics["create.Pod"] += 4
    controller.metrics["status_write"] += 1
    controller.metrics["progress_push"] += 2  # answered 200
    controller.metrics["progress_push_429"] += 1
    queue = controller.queue
    for key in ("a", "b", "c", "d"):
        queue.add(key)
    # One pass that works, one that fails, one conflict (a plain re-add), one still waiting.
    for outcome in ("success", "error", "requeue"):
        key = await queue.get()
        if outcome == "success":
            queue.forget(key)
        elif outcome == "error":
            queue.add_rate_limited(key)
        else:
            queue.add(key)
        queue.done(key)
    controller.informers[("Pod", "ns")].synced.set()
    jobs = controller.informers[("GenericJob", "ns")].cache
    for name, phase in (("a", "Running"), ("b", "Running"), ("c", "Failed"), ("d", None)):
        jobs[("ns", name)] = {"kind": "GenericJob", "metadata": {"name": name, "namespace": "ns"},
                              "status": {"phase": phase} if phase else {}}  # fmt: skip
    async with served(controller) as http:
        status, headers, text = await http.get("/metrics")
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain")
        m = parse_metrics(text)
    await controller.kube.close()
    assert m["create.Pod"] == 4
    assert m["status_write"] == 1
    assert m['controller_runtime_reconcile_total{controller="t9kjob",result="success"}'] == 1
    assert m['controller_runtime_reconcile_total{controller="t9kjob",result="error"}'] == 1
    assert m['controller_runtime_reconcile_total{controller="t9kjob",result="requeue"}'] == 1
    assert m['controller_runtime_reconcile_errors_total{controller="t9kjob"}'] == 1
    assert m['controller_runtime_reconcile_time_seconds_count{controller="t9kjob"}'] == 3
    assert m['controller_runtime_max_concurrent_reconciles{controller="t9kjob"}'] == 3
    assert m['controller_runtime_active_workers{controller="t9kjob"}'] == 0
    assert m['workqueue_queue_duration_seconds_count{name="t9kjob"}'] == 3
    assert m['workqueue_retries_total{name="t9kjob"}'] == 1
    assert m['workqueue_depth{name="t9kjob"}'] == 2 == m["airflow_t9k_controller_queue_depth"]  # d, and c again
    assert m['airflow_t9k_informer_healthy{kind="Pod",watched_namespace="ns"}'] == 1
    assert m['airflow_t9k_informer_healthy{kind="GenericJob",watched_namespace="ns"}'] == 0
    # Jobs by kind and phase (issue 45, item 5), and the process' own figures.
    assert m['airflow_t9k_jobs{kind="GenericJob",phase="Running"}'] == 2
    assert m['airflow_t9k_jobs{kind="GenericJob",phase="Failed"}'] == 1
    assert m['airflow_t9k_jobs{kind="GenericJob",phase="Unknown"}'] == 1
    assert m["process_resident_memory_bytes"] > 10_000_000
    # The push endpoint's answers by code, a family of their own (not `what` values, issue 45 item 5).
    assert m['airflow_t9k_progress_push_requests_total{code="200"}'] == 2
    assert m['airflow_t9k_progress_push_requests_total{code="429"}'] == 1
    assert "progress_push" not in m
    assert "progress_push_429" not in m
    assert 'python_gc_objects_collected_total{generation="0"}' in m


@pytest.mark.asyncio
async def test_instrumented_client_counts_by_code_and_refuses_writes_behind_the_fence():
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.method)
        if request.method == "GET":
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound", "message": "no"}, status=404)
        return web.json_response({"metadata": {"name": "x"}}, status=201 if request.method == "POST" else 200)

    app = web.Application()
    app.router.add_route("*", "/api/v1/namespaces/ns/configmaps{tail:.*}", handle)
    async with TestServer(app) as server:
        metrics = Metrics()
        leading = {"now": True}
        kube = InstrumentedKube(k8s_client.ApiClient(k8s_client.Configuration(host=str(server.make_url("")).rstrip("/"))),
                                metrics, fence=lambda: leading["now"])  # fmt: skip
        try:
            with pytest.raises(Exception, match="404"):
                await kube.get("/api/v1/namespaces/ns/configmaps/x")
            await kube.create("/api/v1/namespaces/ns/configmaps", body={"metadata": {"name": "x"}})
            leading["now"] = False
            with pytest.raises(NotLeader):
                await kube.replace("/api/v1/namespaces/ns/configmaps/x", body={"metadata": {"name": "x"}})
            with pytest.raises(NotLeader):
                await kube.delete("/api/v1/namespaces/ns/configmaps/x")
            with pytest.raises(Exception, match="404"):
                await kube.get("/api/v1/namespaces/ns/configmaps/x")  # reads go on: the caches stay warm
        finally:
            await kube.close()
    assert seen == ["GET", "POST", "GET"]  # the fenced writes never left the process
    m = parse_metrics(generate_latest(metrics.registry).decode())

    def requests(code: str, method: str) -> float:
        return sum(v for k, v in m.items() if k.startswith("rest_client_requests_total{")
                   and f'code="{code}"' in k and f'method="{method}"' in k and 'host="127.0.0.1:' in k)  # fmt: skip

    assert requests("404", "GET") == 2
    assert requests("201", "POST") == 1
    assert requests("200", "PUT") == requests("200", "DELETE") == 0
    assert m['airflow_t9k_api_writes_total{resource="configmaps",verb="create"}'] == 1
    assert m["airflow_t9k_leader_fenced_writes_total"] == 2


@pytest.mark.asyncio
async def test_a_standby_s_queue_wait_starts_when_it_leads():
    controller = offline_controller()
    queue = controller.queue
    queue.add("k")
    queue._added_at["k"] -= 3600  # queued an hour ago, while standing by
    queue.restart_waits()
    await queue.get()
    hist = controller.instruments.queue_wait.labels("t9kjob")
    assert hist._sum.get() < 1.0  # not the hour spent waiting for the lease
    await controller.kube.close()


async def _status(port: int, address: str, path: str) -> int | None:
    import aiohttp

    try:
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"http://{address}:{port}{path}", timeout=aiohttp.ClientTimeout(total=2)) as r,
        ):
            return r.status
    except aiohttp.ClientError:
        return None


def _free() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _outside_address() -> str | None:
    """An address of this host that is not loopback (what another host would connect to)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: only picks the outgoing address
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


@pytest.mark.asyncio
async def test_metrics_listen_on_loopback_by_default_and_probes_on_every_address():
    from airflow_t9k.cli import build_parser
    from airflow_t9k.controller.serve import serve_all

    args = build_parser().parse_args(["controller"])
    assert (args.metrics_address, args.health_address) == ("127.0.0.1", "0.0.0.0")
    outside = _outside_address()
    assert outside is not None, "this test needs a non-loopback address on the host"
    controller = offline_controller(workers=1)
    health, metrics = _free(), _free()
    runners = await serve_all(controller, (args.health_address, health), (args.metrics_address, metrics))
    try:
        assert await _status(health, outside, "/healthz") == 200  # the kubelet probes the pod's address
        assert await _status(health, outside, "/metrics") == 404  # not served with the probes
        assert await _status(metrics, "127.0.0.1", "/metrics") == 200
        assert await _status(metrics, outside, "/metrics") is None  # nothing listens there
    finally:
        for r in runners:
            await r.cleanup()
        await controller.kube.close()


@pytest.mark.asyncio
async def test_a_finished_jobs_usage_is_counted_once_by_namespace_and_dag():
    """The executor tells the metrics of the status write that ends a job; later passes start
    from the finished status and count nothing. Only the API write is replaced here."""
    from airflow_t9k.controller.reconcile import Plan

    controller = offline_controller()
    writes: list[dict] = []

    async def write(job, status):
        writes.append(status)
        return {**job, "status": status}

    controller.executor._write_status = write
    usage = {"accelerators": {"nvidia.com/gpu": 120}, "wasted": {"nvidia.com/gpu": 40}, "cpuSeconds": 30, "runs": 2,
             "wallSeconds": 70, "open": {}, "closed": []}  # fmt: skip
    job = {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ns", "uid": "u",
                                              "annotations": {"airflow-t9k.io/dag-id": "nightly"}},
           "status": {"phase": "Running"}}  # fmt: skip
    done = {"phase": "Succeeded", "usage": usage}
    other = {"kind": "GenericJob", "metadata": {"name": "k", "namespace": "ns", "uid": "v"}, "status": {"phase": "Running"}}
    await controller.executor.apply(job, Plan(status=done))
    await controller.executor.apply({**job, "status": done}, Plan(status={**done, "note": "a later pass"}))  # not again
    await controller.executor.apply(job, Plan(status={"phase": "Running", "usage": usage}))  # not the end
    await controller.executor.apply(other, Plan(status={"phase": "Failed", "usage": usage}))  # no DAG annotation
    await controller.kube.close()
    assert len(writes) == 4
    value = controller.instruments.registry.get_sample_value
    nightly = {"job_namespace": "ns", "dag_id": "nightly"}
    assert value("airflow_t9k_job_accelerator_seconds_total", {**nightly, "resource": "nvidia.com/gpu"}) == 120
    assert value("airflow_t9k_job_wasted_accelerator_seconds_total", {**nightly, "resource": "nvidia.com/gpu"}) == 40
    assert value("airflow_t9k_job_cpu_limit_seconds_total", nightly) == 30
    assert value("airflow_t9k_job_wall_seconds_total", nightly) == 70
    assert value("airflow_t9k_jobs_finished_total", {**nightly, "phase": "Succeeded"}) == 1
    assert value("airflow_t9k_jobs_finished_total", {"job_namespace": "ns", "dag_id": "", "phase": "Failed"}) == 1
    no_dag = {"job_namespace": "ns", "dag_id": "", "resource": "nvidia.com/gpu"}
    assert value("airflow_t9k_job_accelerator_seconds_total", no_dag) == 120


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("method", "path", "status", "body"),
    [
        ("GET", "/healthz?verbose", 200, "ok\n"),  # a query string is not part of the route
        ("HEAD", "/healthz", 200, ""),  # the head alone
        ("POST", "/healthz", 405, "method not allowed\n"),
        ("DELETE", "/metrics", 405, "method not allowed\n"),
        ("GET", "/nothing", 404, "not found\n"),
        ("GET", "/", 404, "not found\n"),
    ],
)
async def test_only_gets_of_the_known_paths_are_answered(method, path, status, body):
    controller = offline_controller(workers=1)
    async with served(controller) as http:
        got, headers, text = await http.get(path, method)
    await controller.kube.close()
    assert (got, text) == (status, body)
    assert headers["Connection"] == "close"


async def _raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


@pytest.mark.asyncio
async def test_a_malformed_or_endless_request_head_gets_no_route():
    controller = offline_controller(workers=1)
    listener = await serve(controller, "127.0.0.1", 0)
    try:
        assert (await _raw(listener.port, b"nonsense\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
        assert (await _raw(listener.port, b"GET /healthz\r\n\r\n")).startswith(b"HTTP/1.1 400 ")  # HTTP/0.9
        # A head past the limit is dropped unanswered, not buffered: the connection just closes.
        assert await _raw(listener.port, b"GET /healthz HTTP/1.1\r\nX: " + b"a" * (2 * HEAD_LIMIT) + b"\r\n\r\n") == b""
        # HEAD: the head a GET would get (its Content-Length too), and no body after it
        head = await _raw(listener.port, b"HEAD /healthz HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        assert b"Content-Length: 3\r\n" in head
        assert head.endswith(b"\r\n\r\n")
        # the listener still serves after each
        assert (await _raw(listener.port, b"GET /livez HTTP/1.1\r\n\r\n")).endswith(b"\r\n\r\nok\n")
    finally:
        await listener.cleanup()
        await controller.kube.close()


def test_the_controller_does_not_load_aiohttps_web_server_unless_it_serves_pushes():
    """Its import is about 2 MB of the controller's memory (docs/benchmarks.md, session 16)."""
    code = ("import sys, airflow_t9k.controller.cli, airflow_t9k.controller.serve; "
            "print(sorted(m for m in sys.modules if m.startswith('aiohttp.web')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
