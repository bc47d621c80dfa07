"""A small raw-JSON client on ``kubernetes_asyncio``'s ApiClient.

Plain dicts in and out (the cache, the core and the API all speak the same JSON), while
authentication, TLS and exec-credential refresh stay with ``kubernetes_asyncio``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from airflow_t9k.k8s.errors import from_response

Obj = dict[str, Any]


async def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> k8s_client.ApiClient:
    """kubeconfig when given (or $KUBECONFIG / ~/.kube/config), else in-cluster."""
    configuration = k8s_client.Configuration()
    try:
        await k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except (k8s_config.ConfigException, FileNotFoundError, TypeError):
        if kubeconfig:
            raise
        k8s_config.load_incluster_config(client_configuration=configuration)
    return k8s_client.ApiClient(configuration)


class Kube:
    """Keyword-only verbs over raw JSON. One instance (one connection pool) per process."""

    def __init__(self, api: k8s_client.ApiClient) -> None:
        self.api = api

    async def close(self) -> None:
        await self.api.close()

    async def _send(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                    content_type: str = "application/json", timeout: float | None = 30) -> Any:  # fmt: skip
        params = [(k, str(v).lower() if isinstance(v, bool) else v) for k, v in (query or {}).items() if v is not None]
        return await self.api.call_api(
            path,
            method,
            query_params=params,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )

    async def request(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                      content_type: str = "application/json") -> Obj:  # fmt: skip
        resp = await self._send(method, path, query=query, body=body, content_type=content_type)
        try:
            text = (await resp.read()).decode("utf-8")
        finally:
            resp.release()
        if not 200 <= resp.status <= 299:
            raise from_response(resp.status, text)
        return json.loads(text) if text else {}

    async def get(self, path: str, *, query: dict[str, Any] | None = None) -> Obj:
        return await self.request("GET", path, query=query)

    async def create(self, path: str, *, body: Obj) -> Obj:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, *, body: Obj) -> Obj:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, *, body: Obj, content_type: str = "application/merge-patch+json") -> Obj:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def delete(self, path: str, *, uid: str | None = None, propagation: str = "Background") -> Obj:
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        return await self.request("DELETE", path, body=body)

    async def list_all(self, path: str, *, query: dict[str, Any] | None = None, page: int = 500) -> tuple[list[Obj], str]:
        """Every item across pages, and the list's resourceVersion to watch from."""
        items: list[Obj] = []
        params = {**(query or {}), "limit": page}
        while True:
            out = await self.get(path, query=params)
            items.extend(out.get("items") or [])
            cont = (out.get("metadata") or {}).get("continue")
            if not cont:
                return items, str((out.get("metadata") or {}).get("resourceVersion") or "")
            params["continue"] = cont

    async def watch(self, path: str, *, query: dict[str, Any], timeout_seconds: int = 300,
                    on_open: Callable[[], None] | None = None) -> AsyncIterator[Obj]:  # fmt: skip
        """Watch events as dicts until the server ends the stream; ``on_open`` once it is accepted."""
        params = {**query, "watch": True, "allowWatchBookmarks": True, "timeoutSeconds": timeout_seconds}
        resp = await self._send("GET", path, query=params, timeout=None)
        try:
            if not 200 <= resp.status <= 299:
                raise from_response(resp.status, (await resp.read()).decode("utf-8"))
            if on_open is not None:
                on_open()
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release()
