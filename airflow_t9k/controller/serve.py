"""The controller's small HTTP server: liveness, readiness and Prometheus metrics.

/healthz and /livez answer 200 whenever the process and its event loop answer at all: an
API server outage is not a reason for the kubelet to restart the controller. /readyz is
200 once every cache has synced and every watch is open; it names the watches that are not.

/metrics has its own listener, on 127.0.0.1 by default: it names namespaces and jobs, and
answers anyone who can reach it. The probes must be reachable by the kubelet on the pod's
address; metrics only by a scraper the operator chose (docs/design.md: a sidecar proxy that
checks a token, or ``--metrics-address 0.0.0.0`` behind a NetworkPolicy). When both are given
the same address and port they share one listener.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from airflow_t9k.controller.runner import Controller


def app_for(controller: Controller, probes: bool = True, metrics: bool = True) -> web.Application:
    async def live(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def ready(request: web.Request) -> web.Response:
        failing = controller.unhealthy()
        if not failing:
            return web.Response(text="ok\n")
        return web.Response(status=503, text="not ready:\n" + "".join(f"  {f}\n" for f in failing))

    async def prometheus(request: web.Request) -> web.Response:
        body = generate_latest(controller.instruments.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    if probes:
        app.router.add_get("/healthz", live)
        app.router.add_get("/livez", live)
        app.router.add_get("/readyz", ready)
    if metrics:
        app.router.add_get("/metrics", prometheus)
    return app


async def serve(controller: Controller, address: str, port: int, probes: bool = True, metrics: bool = True) -> web.AppRunner:
    """Start serving; the caller cleans the runner up on shutdown."""
    runner = web.AppRunner(app_for(controller, probes=probes, metrics=metrics), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner


async def serve_all(controller: Controller, health: tuple[str, int], metrics: tuple[str, int]) -> list[web.AppRunner]:
    """The probes and /metrics on their listeners (one when both name the same; port 0: off)."""
    if health == metrics and health[1]:
        return [await serve(controller, *health)]
    runners = []
    if health[1]:
        runners.append(await serve(controller, *health, metrics=False))
    if metrics[1]:
        runners.append(await serve(controller, *metrics, probes=False))
    return runners
