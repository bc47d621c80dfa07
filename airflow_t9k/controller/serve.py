"""The controller's small HTTP server: liveness, readiness and Prometheus metrics.

/healthz and /livez answer 200 whenever the process and its event loop answer at all: an
API server outage is not a reason for the kubelet to restart the controller. /readyz is
200 once every cache has synced and every watch is open; it names the watches that are not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from airflow_t9k.controller.runner import Controller


def app_for(controller: Controller) -> web.Application:
    async def live(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def ready(request: web.Request) -> web.Response:
        failing = controller.unhealthy()
        if not failing:
            return web.Response(text="ok\n")
        return web.Response(status=503, text="not ready:\n" + "".join(f"  {f}\n" for f in failing))

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(controller.instruments.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", live)
    app.router.add_get("/livez", live)
    app.router.add_get("/readyz", ready)
    app.router.add_get("/metrics", metrics)
    return app


async def serve(controller: Controller, address: str, port: int) -> web.AppRunner:
    """Start serving; the caller cleans the runner up on shutdown."""
    runner = web.AppRunner(app_for(controller), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner
