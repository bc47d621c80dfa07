"""A small raw-JSON client on ``kubernetes_asyncio``'s ApiClient.

Plain dicts in and out (the cache, the core and the API all speak the same JSON), while
authentication, TLS and exec-credential refresh stay with ``kubernetes_asyncio``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from airflow_t9k.k8s.errors import from_response

Obj = dict[str, Any]

# The API server's JSON decoder stops at 10,000 levels of nesting; decoding that deep takes
# about two interpreter frames a level.
DEEP_NESTING = 25_000
UNDECODABLE = "UNDECODABLE"  # a watch event type of ours: an object we could not decode

log = logging.getLogger(__name__)


class Undecodable(ValueError):
    """A response (or one watch line) that the JSON decoder cannot take; ``identity`` is what
    could be read of the object without decoding it (name, namespace, uid, kind)."""

    def __init__(self, identity: dict[str, str], cause: str) -> None:
        super().__init__(f"cannot decode {identity or 'a response'}: {cause}")
        self.identity = identity


def decode(raw: str) -> Any:
    """``json.loads``, allowing objects nested as deep as the API server stores them."""
    try:
        return json.loads(raw)
    except RecursionError:
        pass
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEEP_NESTING))
    try:
        return json.loads(raw)
    except (RecursionError, MemoryError) as exc:
        raise Undecodable(identify(raw), type(exc).__name__) from None
    finally:
        sys.setrecursionlimit(limit)


_FIELD = re.compile(r'"(name|namespace|uid|kind|resourceVersion)":"([^"\\]{1,253})"')


def identify(raw: str) -> dict[str, str]:
    """Name, namespace, uid and kind of the first object in ``raw``, read without decoding it.

    The API server writes keys in order (apiVersion, kind, metadata, spec), so the first
    occurrences, before any deep part, are the object's own.
    """
    found: dict[str, str] = {}
    for m in _FIELD.finditer(raw, 0, 8192):
        found.setdefault(m.group(1), m.group(2))
    return {k: v for k, v in found.items() if k != "resourceVersion"}


_LIST_META = re.compile(r'"metadata":(\{[^{}]*\})\}\s*$')


def list_metadata(raw: str) -> Obj:
    """A list's own metadata (continue, resourceVersion), which the API server writes last."""
    m = _LIST_META.search(raw[-4096:])
    return json.loads(m.group(1)) if m else {}


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
        self.skipped: list[dict[str, str]] = []  # identities of objects too deep to decode

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
        return decode(text) if text else {}

    async def _page(self, path: str, params: dict[str, Any]) -> tuple[list[Obj], Obj]:
        """One page of a list: its items and its metadata. An item too deep to decode is left
        out (and logged) rather than failing the whole list: pages of one pin it down."""
        try:
            out = await self.get(path, query=params)
            return out.get("items") or [], out.get("metadata") or {}
        except Undecodable:
            if params.get("limit") == 1:
                raise
        items: list[Obj] = []
        single = {**params, "limit": 1}
        for _ in range(int(params.get("limit") or 500)):
            try:
                out = await self.get(path, query=single)
                page, meta = out.get("items") or [], out.get("metadata") or {}
            except Undecodable as exc:
                raw = await self.request_text(path, single)
                log.warning("left out of the list of %s: %s", path, exc)
                page, meta = [], list_metadata(raw)
                self._skip(exc.identity)
            items += page
            if not meta.get("continue"):
                return items, meta
            single["continue"] = meta["continue"]
        return items, meta

    async def request_text(self, path: str, query: dict[str, Any]) -> str:
        resp = await self._send("GET", path, query=query)
        try:
            return (await resp.read()).decode("utf-8")
        finally:
            resp.release()

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
            page_items, meta = await self._page(path, params)
            items.extend(page_items)
            cont = meta.get("continue")
            if not cont:
                return items, str(meta.get("resourceVersion") or "")
            params["continue"] = cont

    def _skip(self, identity: dict[str, str]) -> None:
        self.skipped.append(identity)
        del self.skipped[:-100]

    def _event(self, line: str) -> Obj:
        try:
            return decode(line)
        except Undecodable as exc:  # one object, not the stream: the watch goes on
            log.warning("watch event left out: %s", exc)
            self._skip(exc.identity)
            return {"type": UNDECODABLE, "object": {"kind": exc.identity.get("kind"), "metadata": exc.identity}}

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
                        yield self._event(line.decode("utf-8"))
        finally:
            resp.release()
