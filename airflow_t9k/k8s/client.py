"""A small raw-JSON client: plain dicts in and out (the cache, the core and the API all speak
the same JSON).

Requests go through a transport: ``DirectTransport`` (one aiohttp session, configured by
``kubeconfig.py``) for the controller, or ``ApiClientTransport`` around ``kubernetes_asyncio``'s
ApiClient, which the Airflow hooks pass in and which handles what ``kubeconfig.py`` leaves to
it (exec plugins, auth-providers, proxies). ``kubernetes_asyncio`` is imported only then: it
costs about 40 MB of memory (docs/design.md, "The controller's client").
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import sys
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from airflow_t9k import __version__
from airflow_t9k.k8s import kubeconfig
from airflow_t9k.k8s.errors import from_response

try:
    import msgspec
    from msgspec.json import decode as _fast_decode

    HAVE_MSGSPEC = True
except ImportError:  # pragma: no cover - msgspec is a dependency; json.loads still works
    HAVE_MSGSPEC = False
    _fast_decode = json.loads  # type: ignore[assignment]  # called with one argument, as msgspec's is

if TYPE_CHECKING:
    import aiohttp
    from kubernetes_asyncio.client import ApiClient

Obj = dict[str, Any]

# The API server's JSON decoder stops at 10,000 levels of nesting; decoding that deep takes
# about two interpreter frames a level.
DEEP_NESTING = 25_000
UNDECODABLE = "UNDECODABLE"  # a watch event type of ours: an object we could not decode
# What an API server answers with an object's metadata only; plain JSON from one that cannot.
PARTIAL_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

log = logging.getLogger(__name__)


class Undecodable(ValueError):
    """A response (or one watch line) that the JSON decoder cannot take; ``identity`` is what
    could be read of the object without decoding it (name, namespace, uid, kind)."""

    def __init__(self, identity: dict[str, str], cause: str) -> None:
        super().__init__(f"cannot decode {identity or 'a response'}: {cause}")
        self.identity = identity


# msgspec recurses on the C stack as deep as the recursion limit lets it, and its frames are
# larger than json's: with the limit the controller sets (DEEP_NESTING) a 24,000-level input
# crashes the process instead of raising. It gets only what cannot nest deeper than this
# (nesting is bounded by the count of brackets), unless the limit itself is that low.
FAST_MAX_DEPTH = 2_000


def _openings(raw: str | bytes) -> int:
    if isinstance(raw, bytes):
        return raw.count(b"{") + raw.count(b"[")
    return raw.count("{") + raw.count("[")


def decode(raw: str | bytes) -> Any:
    """JSON as ``json.loads`` reads it, allowing objects nested as deep as the API server
    stores them.

    msgspec first (several times faster on an API object); on anything it refuses (NaN, lone
    surrogates, numbers out of float range, malformed input, nesting past the recursion
    limit) ``json.loads`` decides, so the result and the errors are ``json.loads``'s.
    """
    if sys.getrecursionlimit() <= FAST_MAX_DEPTH or _openings(raw) <= FAST_MAX_DEPTH:
        try:
            return _fast_decode(raw)
        except Exception:  # noqa: BLE001, S110 - json.loads below decides what the input is
            pass
    try:
        return json.loads(raw)
    except RecursionError:
        pass
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEEP_NESTING))
    try:
        return json.loads(raw)
    except (RecursionError, MemoryError) as exc:
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        raise Undecodable(identify(text), type(exc).__name__) from None
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


Admit = Callable[[Obj], bool]  # given {"kind", "metadata"} of an item: decode it whole?

if HAVE_MSGSPEC:

    class _Peek(msgspec.Struct):
        """An object's kind and metadata; everything else (a ConfigMap's data, a pod's spec) is
        skipped by the decoder without being built."""

        apiVersion: str = ""
        kind: str = ""
        metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    class _EventPeek(msgspec.Struct):
        type: str = ""
        object: _Peek = msgspec.field(default_factory=_Peek)

    class _PagePeek(msgspec.Struct):
        """A list's items left undecoded (slices of the answer), and its own metadata."""

        items: list[msgspec.Raw] = msgspec.field(default_factory=list)
        metadata: dict[str, Any] = msgspec.field(default_factory=dict)


def peek_event(line: bytes) -> tuple[str, Obj] | None:
    """(type, {"kind", "metadata"}) of a watch event line, decoding nothing else; None when the
    line cannot be read so (it is then decoded whole, as before)."""
    if not HAVE_MSGSPEC:
        return None
    try:
        event = msgspec.json.decode(line, type=_EventPeek)
    except Exception:  # noqa: BLE001 - nested too deep, malformed: the full decoder decides
        return None
    return event.type, _stub(event.object)


def _stub(peek: Any) -> Obj:
    """Kind (and apiVersion) only where the answer has them: a LIST leaves them off its items,
    and the informer fills in its own kind where none is given."""
    out: Obj = {"metadata": peek.metadata}
    if peek.kind:
        out["kind"] = peek.kind
    if peek.apiVersion:
        out["apiVersion"] = peek.apiVersion
    return out


_LIST_META = re.compile(r'"metadata":(\{[^{}]*\})\}\s*$')


def list_metadata(raw: str) -> Obj:
    """A list's own metadata (continue, resourceVersion), which the API server writes last."""
    m = _LIST_META.search(raw[-4096:])
    return json.loads(m.group(1)) if m else {}


# The mark that ends a pod log line cut at its cap: how many bytes of the line were left out.
CUT_MARK = " \u2026 [cut: {} bytes]"
CUT_MARK_ROOM = 40  # bytes the mark takes at most (a 20-digit count)
# The stamp a log read with ``timestamps=true`` starts each line with (RFC 3339, then a space).
_STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d) ")
STAMP_ROOM = 64  # bytes a line's stamp takes at most, kept besides the cap


def cut_line(text: bytes, max_line: int, dropped: int = 0) -> bytes:
    """``text`` as it is when it fits in ``max_line`` bytes (and nothing of it was ``dropped``
    before), else its start, ended at a character's boundary, and the cut mark naming how many
    bytes were left out: at most ``max_line`` bytes in all (for a cap of at least
    ``CUT_MARK_ROOM``)."""
    if not dropped and len(text) <= max_line:
        return text
    keep = max(min(len(text), max_line - CUT_MARK_ROOM), 0)
    while 0 < keep < len(text) and text[keep] & 0xC0 == 0x80:  # not inside a UTF-8 character
        keep -= 1
    return text[:keep] + CUT_MARK.format(dropped + len(text) - keep).encode()


class LineSplitter:
    """The lines of a streamed answer, from its chunks as they arrive, in time linear in its size.

    Taking one line at a time off the front of a buffer (``buffer.split(b"\n", 1)``) copies the
    rest of the buffer for every line: a chunk of 100,000 short lines cost 100,000 copies of up
    to the chunk's size (a replica printing fast kept a core busy). Here each chunk is split once,
    and a line arriving over several chunks is kept as its pieces until it ends. With
    ``max_line``, a longer line is cut there and the rest of it skipped, so one endless line
    cannot grow the buffer.

    ``log=True`` reads a pod's log (read with ``timestamps=true``, or not): a ``\r`` ends a
    redraw of the line (a progress bar redrawn for an hour is one line of megabytes), and of a
    line's redraws only the last with something other than white space is kept, after the
    line's stamp: what a terminal shows once the line ended. ``max_line`` then bounds the text
    after the stamp, and a line cut there comes whole at its end, as its start and
    ``CUT_MARK`` with the count of bytes left out (never the rest as lines of their own). A line
    comes when it ends, so it holds the text of the line at most twice (``max_line`` each), never
    the line.
    """

    def __init__(self, max_line: int | None = None, *, log: bool = False) -> None:
        self.max_line = max_line
        self.log = log
        self._pieces: list[bytes] = []
        self._size = 0
        self._skipping = False
        # log=True: the open redraw's bytes left out past the cap; the open line's stamp (with
        # its space), known once its first redraw ended; its last ended redraw with text.
        self._dropped = 0
        self._stamp: bytes | None = None
        self._kept: tuple[bytes, int] | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes (without their newline)."""
        if self.log:
            return self._feed_log(chunk)
        parts = chunk.split(b"\n")
        out: list[bytes] = []
        for part in parts[:-1]:
            line = b"".join(self._pieces) + part if self._pieces else part
            if not self._skipping:
                out.append(line if self.max_line is None else line[: self.max_line])
            self._pieces, self._size, self._skipping = [], 0, False
        rest = parts[-1]
        if rest and not self._skipping:
            self._pieces.append(rest)
            self._size += len(rest)
            if self.max_line is not None and self._size > self.max_line:
                out.append(b"".join(self._pieces)[: self.max_line])
                self._pieces, self._size, self._skipping = [], 0, True
        return out

    def flush(self) -> list[bytes]:
        """The last line when the answer ended without its newline: for a read that does not
        follow (nothing more comes). A followed stream leaves it: a reopened one reads it whole."""
        if self.log:
            if not (self._pieces or self._dropped or self._stamp is not None):
                return []
            return [self._end_line()]
        line, self._pieces, self._size = b"".join(self._pieces), [], 0
        if not line or self._skipping:
            self._skipping = False
            return []
        return [line if self.max_line is None else line[: self.max_line]]

    def _feed_log(self, chunk: bytes) -> list[bytes]:
        parts = chunk.split(b"\n")
        out: list[bytes] = []
        for part in parts[:-1]:
            if (not self._pieces and self._stamp is None and not self._dropped and b"\r" not in part
                    and (self.max_line is None or len(part) <= self.max_line)):  # fmt: skip
                out.append(part)  # the common line: in one chunk, short, no redraws
                continue
            self._add(part)
            out.append(self._end_line())
        if parts[-1]:
            self._add(parts[-1])
        return out

    def _add(self, piece: bytes) -> None:
        """More of the open line (no newline in it)."""
        redraws = piece.split(b"\r")
        for redraw in redraws[:-1]:
            self._take(redraw)
            self._end_redraw()
        self._take(redraws[-1])

    def _take(self, part: bytes) -> None:
        if not part:
            return
        if self.max_line is None:
            room = len(part)
        else:  # the first redraw holds the line's stamp too
            room = self.max_line + (STAMP_ROOM if self._stamp is None else 0) - self._size
        if room >= len(part):
            self._pieces.append(part)
            self._size += len(part)
            return
        if room > 0:
            self._pieces.append(part[:room])
            self._size += room
        self._dropped += len(part) - max(room, 0)

    def _end_redraw(self) -> None:
        text, dropped = b"".join(self._pieces), self._dropped
        self._pieces, self._size, self._dropped = [], 0, 0
        if self._stamp is None:  # the line's first redraw: it starts with the stamp
            m = _STAMP.match(text)
            self._stamp = m.group(0) if m else b""
            text = text[len(self._stamp) :]
        if self._kept is None or dropped or text.strip():
            self._kept = (text, dropped)

    def _end_line(self) -> bytes:
        self._end_redraw()
        text, dropped = self._kept or (b"", 0)
        line = (self._stamp or b"") + (text if self.max_line is None else cut_line(text, self.max_line, dropped))
        self._stamp, self._kept = None, None
        return line


class Response(Protocol):
    """What a transport returns: an aiohttp ClientResponse, whichever transport sent it."""

    status: int

    async def read(self) -> bytes: ...

    def release(self) -> Any: ...

    @property
    def content(self) -> Any: ...  # .iter_any(): the body's chunks as they arrive


class Transport(Protocol):
    host: str  # scheme://host:port, for metrics

    async def send(self, method: str, path: str, query: list[tuple[str, Any]], headers: dict[str, str],
                   body: Any, timeout: float | None) -> Response: ...  # fmt: skip

    async def close(self) -> None: ...


class ApiClientTransport:
    """Through ``kubernetes_asyncio``'s ApiClient: its authentication (exec plugins, token
    refresh), TLS and proxy settings."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.host = str(getattr(api.configuration, "host", "") or "")

    async def send(self, method: str, path: str, query: list[tuple[str, Any]], headers: dict[str, str],
                   body: Any, timeout: float | None) -> Response:  # fmt: skip
        return await self.api.call_api(
            path,
            method,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )

    async def close(self) -> None:
        await self.api.close()


BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class DirectTransport:
    """One aiohttp session straight to the API server, as ``kubeconfig.Endpoint`` says.

    Sends what ApiClient's REST layer sends (URL, query encoding, JSON body, timeouts, a 2 MiB
    read buffer for large watch events), without its per-request header walk and with
    ``trust_env=False``: the environment's proxy settings were checked once when loading
    (a proxy that applies sends us to ``kubernetes_asyncio``), not on every request.
    """

    def __init__(self, endpoint: kubeconfig.Endpoint, limit: int = 100) -> None:
        self.endpoint = endpoint
        self.host = endpoint.server
        self.limit = limit
        self._ssl = endpoint.ssl_context()  # now: a bad certificate fails at start, not at the first request
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.limit, ssl=self._ssl if self._ssl is not None else True)
        return aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=2**21,
                                     headers={"User-Agent": f"airflow-t9k/{__version__}"})  # fmt: skip

    async def send(self, method: str, path: str, query: list[tuple[str, Any]], headers: dict[str, str],
                   body: Any, timeout: float | None) -> Response:  # fmt: skip
        import aiohttp

        if self._session is None:
            self._session = self._open()  # in the running loop, as aiohttp wants
        url = self.host + path
        if query:
            url += "?" + urlencode(query)
        extra: dict[str, Any] = {}
        if self.endpoint.tls_server_name:
            extra["server_hostname"] = self.endpoint.tls_server_name
        data = json.dumps(body) if body is not None and method in BODY_METHODS else None
        # No redirects: the API server sends none, and aiohttp's redirect errors carry the
        # request's headers (the bearer token) into their repr, which ends up in logs.
        return await self._session.request(
            method, url, headers={**headers, **self.endpoint.headers()}, data=data,
            timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False, **extra,
        )  # fmt: skip

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _env_proxy(server: str) -> bool:
    """Whether $HTTPS_PROXY / $NO_PROXY (what aiohttp's trust_env reads) send ``server``
    through a proxy."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        get_env_proxy_for_url(URL(server))
    except LookupError:
        return False
    return True


async def load_api_client(kubeconfig: str | None = None, context: str | None = None,
                          connections: int | None = None) -> ApiClient:  # fmt: skip
    """``kubernetes_asyncio``'s loader: kubeconfig when given (or $KUBECONFIG /
    ~/.kube/config), else in-cluster. ``connections``: its pool's size (its default, 5 per
    CPU, when not given)."""
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config

    configuration = k8s_client.Configuration()
    try:
        await k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except (k8s_config.ConfigException, FileNotFoundError, TypeError):
        if kubeconfig:
            raise
        k8s_config.load_incluster_config(client_configuration=configuration)
    if connections is not None:
        configuration.connection_pool_maxsize = connections
    return k8s_client.ApiClient(configuration)


async def load_transport(kubeconfig_file: str | None = None, context: str | None = None,
                         connections: int = 100) -> Transport:  # fmt: skip
    """The direct transport where ``kubeconfig.py`` reads the configuration fully, else
    ``kubernetes_asyncio``'s. Raises ``kubeconfig.KubeconfigError`` for a configuration that
    cannot work. ``connections`` bounds the pool (0: no bound): a request beyond it waits for
    a free one, so a pool that holds long-lived streams needs one per stream."""
    try:
        endpoint = kubeconfig.load(kubeconfig_file, context)
        if _env_proxy(endpoint.server):
            raise kubeconfig.NeedsFullLoader("a proxy from the environment applies to the API server")
        return DirectTransport(endpoint, limit=connections)
    except kubeconfig.NeedsFullLoader as exc:
        if importlib.util.find_spec("kubernetes_asyncio") is None:
            # The controller's image leaves kubernetes_asyncio out (docs/install.md, "The image").
            raise kubeconfig.KubeconfigError(
                f"{exc}: that needs kubernetes_asyncio's loader, which is not installed here (the controller's image "
                "leaves it out); install airflow-t9k with its dependencies, or use a token, a certificate or in-cluster"
            ) from None
        log.info("using kubernetes_asyncio's loader: %s", exc)
    return ApiClientTransport(await load_api_client(kubeconfig_file, context, connections))


async def connect(kubeconfig_file: str | None = None, context: str | None = None) -> Kube:
    return Kube(await load_transport(kubeconfig_file, context))


def query_params(query: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """A request's query as the API server reads it: booleans as ``true``/``false``, None left out."""
    return [(k, str(v).lower() if isinstance(v, bool) else v) for k, v in (query or {}).items() if v is not None]


class Kube:
    """Keyword-only verbs over raw JSON. One instance (one connection pool) per process."""

    def __init__(self, api: Transport | ApiClient) -> None:
        """``api``: a transport, or a ``kubernetes_asyncio`` ApiClient (the hooks pass theirs)."""
        self.transport: Transport = ApiClientTransport(api) if hasattr(api, "call_api") else api  # type: ignore[arg-type]  # hasattr() narrows to ApiClient; mypy cannot see it
        self.skipped: list[dict[str, str]] = []  # identities of objects too deep to decode

    async def close(self) -> None:
        await self.transport.close()

    async def _send(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                    content_type: str = "application/json", timeout: float | None = 30,
                    accept: str = "application/json") -> Any:  # fmt: skip
        headers = {"Accept": accept, "Content-Type": content_type}
        return await self.transport.send(method, path, query_params(query), headers, body, timeout)

    async def request(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                      content_type: str = "application/json") -> Obj:  # fmt: skip
        raw = await self._read(method, path, query=query, body=body, content_type=content_type)
        return decode(raw) if raw else {}

    async def _read(self, method: str, path: str, **kwargs: Any) -> bytes:
        """The answer's body; an error status raises as the error it names."""
        resp = await self._send(method, path, **kwargs)
        try:
            raw: bytes = await resp.read()
        finally:
            resp.release()
        if not 200 <= resp.status <= 299:
            raise from_response(resp.status, raw.decode("utf-8", errors="replace"))
        return raw

    async def _admitted_page(self, path: str, params: dict[str, Any], admit: Admit,
                             body: Admit | None = None) -> tuple[list[Obj], Obj] | None:  # fmt: skip
        """One page of a list, decoding only the items ``admit`` wants from their kind and
        metadata: a tenant's thousand 1 MB ConfigMaps carrying our label are skipped in the
        answer, never built into Python objects. None when the page cannot be read so."""
        raw = await self._read("GET", path, query=params)
        try:
            page = msgspec.json.decode(raw, type=_PagePeek)
        except Exception:  # noqa: BLE001 - nested too deep, malformed: the whole-page path decides
            return None
        items: list[Obj] = []
        for item in page.items:
            try:
                stub: Obj | None = _stub(msgspec.json.decode(item, type=_Peek))
            except Exception:  # noqa: BLE001 - too deep to peek at: decoded whole below
                stub = None
            if stub is not None and not admit(stub):
                continue
            if stub is not None and body is not None and not body(stub):
                items.append(stub)  # kept, but nothing past its metadata is read (an evidence ConfigMap's data)
                continue
            try:
                items.append(decode(bytes(item)))
            except Undecodable as exc:
                log.warning("left out of the list of %s: %s", path, exc)
                self._skip(exc.identity)
        return items, dict(page.metadata)

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
        """A GET whose answer is text (a list left undecoded, a pod's log); errors raise as ``request``'s."""
        return (await self._read("GET", path, query=query)).decode("utf-8", errors="replace")

    async def get(self, path: str, *, query: dict[str, Any] | None = None) -> Obj:
        return await self.request("GET", path, query=query)

    async def get_metadata(self, path: str) -> Obj:
        """An object as PartialObjectMetadata: its metadata, nothing else. A CRD's labels without
        its schema (about 230 KB of JSON each of ours, read at every start otherwise)."""
        raw = await self._read("GET", path, accept=PARTIAL_METADATA)
        return decode(raw) if raw else {}

    async def create(self, path: str, *, body: Obj) -> Obj:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, *, body: Obj) -> Obj:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, *, body: Obj, content_type: str = "application/merge-patch+json") -> Obj:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def delete(self, path: str, *, uid: str | None = None, propagation: str = "Background",
                     grace_seconds: int | None = None) -> Obj:  # fmt: skip
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        return await self.request("DELETE", path, body=body)

    async def list_all(self, path: str, *, query: dict[str, Any] | None = None, page: int = 500,
                       admit: Admit | None = None, shape: Callable[[Obj], Obj] | None = None,
                       body: Admit | None = None) -> tuple[list[Obj], str]:  # fmt: skip
        """Every item across pages, and the list's resourceVersion to watch from.

        ``admit`` (given an item's kind and metadata) leaves items out before they are decoded,
        and ``body`` says which items kept are decoded past their metadata (the others are kept
        as kind and metadata); ``shape`` is applied to each item kept, page by page: what a list holds at any moment is
        one answer of at most ``page`` items plus what was kept (and shaped) of earlier pages."""
        items: list[Obj] = []
        params = {**(query or {}), "limit": page}
        while True:
            found = await self._admitted_page(path, params, admit, body) if admit is not None and HAVE_MSGSPEC else None
            if found is None:
                page_items, meta = await self._page(path, params)
                if admit is not None:
                    page_items = [i for i in page_items if admit(i)]
            else:
                page_items, meta = found
            items.extend(map(shape, page_items) if shape is not None else page_items)
            cont = meta.get("continue")
            if not cont:
                return items, str(meta.get("resourceVersion") or "")
            params["continue"] = cont

    def _skip(self, identity: dict[str, str]) -> None:
        self.skipped.append(identity)
        del self.skipped[:-100]

    def _event(self, line: bytes | str) -> Obj:
        try:
            return decode(line)
        except Undecodable as exc:  # one object, not the stream: the watch goes on
            log.warning("watch event left out: %s", exc)
            self._skip(exc.identity)
            return {"type": UNDECODABLE, "object": {"kind": exc.identity.get("kind"), "metadata": exc.identity}}

    async def lines(self, path: str, *, query: dict[str, Any], timeout: float | None = None,
                    max_line: int = 1 << 16, log: bool = False, flush: bool = False) -> AsyncGenerator[bytes, None]:  # fmt: skip
        """The lines of a streamed answer (a followed pod log) as they arrive, until it ends or
        ``timeout`` seconds have passed; a line longer than ``max_line`` bytes is cut there
        and the rest of it skipped, so one endless line cannot grow the buffer. ``log``: a pod's
        log, split as ``LineSplitter(log=True)`` does (redraws, stamps, the cut mark);
        ``flush``: an unterminated last line comes too (a read that does not follow)."""
        resp = await self._send("GET", path, query=query, timeout=timeout)
        try:
            if not 200 <= resp.status <= 299:
                raise from_response(resp.status, (await resp.read()).decode("utf-8", errors="replace"))
            splitter = LineSplitter(max_line, log=log)
            async for chunk in resp.content.iter_any():
                for line in splitter.feed(chunk):
                    yield line
            if flush:
                for line in splitter.flush():
                    yield line
        finally:
            resp.release()

    async def watch(self, path: str, *, query: dict[str, Any], timeout_seconds: int = 300,
                    on_open: Callable[[], None] | None = None,
                    admit: Callable[[str, Obj], bool] | None = None,
                    body: Admit | None = None) -> AsyncGenerator[Obj, None]:  # fmt: skip
        """Watch events as dicts until the server ends the stream; ``on_open`` once it is accepted.

        ``admit(type, {"kind", "metadata"})`` says which events are decoded whole, and ``body``
        which of those need more than their metadata; any other comes as that stub alone (its
        data or spec never decoded)."""
        params = {**query, "watch": True, "allowWatchBookmarks": True, "timeoutSeconds": timeout_seconds}
        resp = await self._send("GET", path, query=params, timeout=None)
        try:
            if not 200 <= resp.status <= 299:
                raise from_response(resp.status, (await resp.read()).decode("utf-8"))
            if on_open is not None:
                on_open()
            splitter = LineSplitter()
            async for chunk in resp.content.iter_any():
                for line in splitter.feed(chunk):
                    if not line.strip():
                        continue
                    peek = peek_event(line) if admit is not None else None
                    if (
                        peek is not None
                        and peek[0] not in ("BOOKMARK", "ERROR")
                        and (
                            not admit(*peek) or (body is not None and not body(peek[1]))  # type: ignore[misc]
                        )
                    ):
                        yield {"type": peek[0], "object": peek[1]}
                    else:
                        yield self._event(line)
        finally:
            resp.release()
