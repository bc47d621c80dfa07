"""``airflow-t9k controller``: run the bundled controller."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

from airflow_t9k.api.resources import RESOURCES, resource_for
from airflow_t9k.k8s.client import Kube, load_api_client
from airflow_t9k.k8s.errors import ApiError, Forbidden, NotFound
from airflow_t9k.controller.runner import Controller, Settings
from airflow_t9k.kinds.base import LABEL_MANAGED_BY, MANAGED_BY
from airflow_t9k.kinds.registry import KINDS

log = logging.getLogger("airflow_t9k.controller")


class RefuseToStart(Exception):
    """Starting would fight another controller, or could not work at all."""


def add_controller_parser(sub: Any) -> None:
    p = sub.add_parser("controller", help="run the bundled T9k job controller")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("-n", "--namespace", action="append", dest="namespaces", default=[],
                   help="namespace to watch; repeat for several; default: all namespaces")  # fmt: skip
    p.add_argument("--workers", type=int, default=4, help="jobs reconciled concurrently (default 4)")
    p.add_argument("--health-port", type=int, default=8081, help="port for /healthz and /metrics; 0 disables")
    p.add_argument("--health-address", default="0.0.0.0", help="address for the health endpoint")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--kind", action="append", dest="kinds", default=[], choices=sorted(RESOURCES),
                   help="job kind to watch; repeat for several; default: every kind (e.g. leave AscendJob to "
                        "MindCluster's ascend-operator where it runs)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="start even where another controller seems to own the CRDs")
    p.set_defaults(func=run_controller)


async def check_crds(kube: Kube, force: bool, kinds: list[str]) -> None:
    """Refuse to run where the T9k platform's own CRDs (and so its controllers) are installed."""
    for kind in kinds:
        name = resource_for(kind).crd_name
        try:
            crd = await kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        except NotFound:
            raise RefuseToStart(
                f"CRD {name} is not installed; install it first: airflow-t9k crds | kubectl apply --server-side -f -"
            ) from None
        except Forbidden:
            log.warning("cannot read CRD %s (RBAC); skipping the check for the T9k platform", name)
            continue
        owner = ((crd.get("metadata") or {}).get("labels") or {}).get(LABEL_MANAGED_BY)
        if owner != MANAGED_BY and not force:
            raise RefuseToStart(
                f"CRD {name} was not installed by airflow-t9k (managed-by={owner!r}): the T9k platform's own "
                "controllers seem to manage these kinds here, and two controllers would fight over the same "
                "pods. Use the platform's controllers, or pass --force if you are sure."
            )


async def serve_health(controller: Controller, address: str, port: int) -> asyncio.AbstractServer:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = (await reader.readline()).decode(errors="replace").split()
            path = request[1] if len(request) > 1 else "/"
            if path.startswith("/metrics"):
                body = "".join(f'airflow_t9k_controller_total{{what="{k}"}} {v}\n' for k, v in sorted(controller.metrics.items()))
                body += f"airflow_t9k_controller_queue_depth {len(controller.queue)}\n"
                code = "200 OK"
            elif controller.healthy():
                code, body = "200 OK", "ok\n"
            else:
                code, body = "503 Service Unavailable", "not synced or a watch is failing\n"
            writer.write(f"HTTP/1.1 {code}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode())
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(handle, address, port)


async def main_async(args: argparse.Namespace) -> int:
    kube = Kube(await load_api_client(args.kubeconfig, args.context))
    kinds = sorted(set(args.kinds or RESOURCES))
    server = None
    try:
        try:
            await check_crds(kube, args.force, kinds)
        except RefuseToStart as exc:
            log.error("%s", exc)
            return 3
        except ApiError as exc:
            log.error("cannot reach the API server: %s", exc)
            return 4
        controller = Controller(kube, Settings(namespaces=args.namespaces, workers=args.workers, kinds=kinds))
        if args.health_port:
            server = await serve_health(controller, args.health_address, args.health_port)
        task = asyncio.create_task(controller.run())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        scope = ", ".join(args.namespaces) or "all namespaces"
        log.info("controller started: reconciling %s in %s, %d workers", ", ".join(k for k in kinds if k in KINDS), scope, args.workers)
        try:
            await task
        except asyncio.CancelledError:
            log.info("controller stopped")
        return 0
    finally:
        if server is not None:
            server.close()
        await kube.close()


def run_controller(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The client library logs whole response bodies at DEBUG, Secrets included (our SSH keys).
    for noisy in ("kubernetes_asyncio", "aiohttp"):
        logging.getLogger(noisy).setLevel(max(logging.INFO, logging.getLogger().level))
    return asyncio.run(main_async(args))
