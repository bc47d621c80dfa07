"""Where the API server is and how to authenticate to it, read without ``kubernetes_asyncio``.

The controller needs only what a kubeconfig with a token or a client certificate, or a pod's
service account, says; importing ``kubernetes_asyncio`` for that costs about 40 MB (all its
generated models). Anything this module does not read the same way (exec plugins,
auth-providers, basic auth, impersonation, proxies, several files in $KUBECONFIG) raises
``NeedsFullLoader`` and the caller uses ``kubernetes_asyncio``'s loader instead.

The choices follow ``kubernetes_asyncio`` where it and client-go agree: ``*-data`` wins over
the file, ``token`` over ``tokenFile``, relative paths are relative to the kubeconfig's own
directory. Unlike it, a ``tokenFile`` (and the service-account token) is read again every
minute, since bound tokens rotate.

Two configurations are refused rather than followed. A bearer token to a plain ``http://``
server goes in clear text to anyone on the path (it is the controller's whole identity):
refused unless ``T9K_ALLOW_HTTP_TOKEN=true`` says the path is trusted (a local proxy).
``insecure-skip-tls-verify`` next to a certificate authority contradicts itself (client-go
refuses it too): the CA would be silently ignored.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REFRESH = 60.0  # seconds; kubelet rotates bound tokens well before they expire
ALLOW_HTTP_TOKEN = "T9K_ALLOW_HTTP_TOKEN"  # env: "true" lets a token go to an http:// server
# Keys of a user or cluster entry that only the full loader understands.
USER_FALLBACK = ("exec", "auth-provider", "username", "password", "as", "as-uid", "as-groups", "as-user-extra")
CLUSTER_FALLBACK = ("proxy-url",)


class NeedsFullLoader(Exception):
    """The configuration uses something only ``kubernetes_asyncio``'s loader handles."""


class KubeconfigError(ValueError):
    """A kubeconfig (or the pod's service account) that cannot work; the message says why."""


class NoKubeconfig(Exception):
    """No kubeconfig at the default places: try in-cluster."""


class TokenSource:
    """A bearer token, fixed or read from a file at most once a ``TOKEN_REFRESH``.

    A failed re-read keeps the last token (client-go does the same): the file is replaced
    atomically by the kubelet, and a request with a token a minute old still works.
    """

    def __init__(self, token: str | None = None, path: str | None = None, refresh: float = TOKEN_REFRESH) -> None:
        self._token = (token or "").strip()
        self.path = path
        self.refresh = refresh
        self._read_at = -float("inf")
        if path is not None:
            self._read()

    def _read(self) -> None:
        try:
            token = Path(self.path or "").read_text().strip()
        except OSError as exc:
            if not self._token:
                raise KubeconfigError(f"cannot read the token file {self.path}: {exc.strerror}") from None
            return
        if not token and not self._token:
            raise KubeconfigError(f"the token file {self.path} is empty")
        if token:
            self._token = token
        self._read_at = time.monotonic()

    def header(self) -> str:
        if self.path is not None and time.monotonic() - self._read_at >= self.refresh:
            self._read()
        return f"Bearer {self._token}"

    def __repr__(self) -> str:  # never the token itself
        return f"TokenSource(path={self.path!r})"


@dataclass(frozen=True)
class Endpoint:
    """One API server and our credentials for it. ``repr`` leaves secrets out."""

    server: str  # scheme://host[:port][/prefix], no trailing slash
    ca_file: str | None = None
    ca_data: str | None = field(default=None, repr=False)  # PEM
    insecure: bool = False
    tls_server_name: str | None = None
    token: TokenSource | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = field(default=None, repr=False)  # PEM
    key_data: bytes | None = field(default=None, repr=False)  # PEM
    source: str = ""  # where it came from, for messages: "kubeconfig /path (context c)", "in-cluster"

    @property
    def host(self) -> str:
        return self.server

    def headers(self) -> dict[str, str]:
        return {"Authorization": self.token.header()} if self.token is not None else {}

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS settings for an https server (None for http)."""
        if not self.server.startswith("https"):
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise KubeconfigError(f"{self.source}: the certificate authority cannot be loaded ({_why(exc)})") from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file or self.cert_data:
            try:
                _load_client_cert(ctx, self)
            except (ssl.SSLError, OSError, ValueError) as exc:
                raise KubeconfigError(f"{self.source}: the client certificate or key cannot be loaded "
                                      f"({_why(exc)})") from None  # fmt: skip
        return ctx


def _why(exc: BaseException) -> str:
    # The strerror/reason, never the argument (which may be PEM data).
    return str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or type(exc).__name__)


def _load_client_cert(ctx: ssl.SSLContext, ep: Endpoint) -> None:
    """ssl loads certificates from files only: in-memory ones go through private temporary
    files that are gone before this returns."""
    with tempfile.TemporaryDirectory(prefix="airflow-t9k-tls-") as tmp:
        cert = ep.cert_file
        key = ep.key_file
        if ep.cert_data is not None:
            cert = os.path.join(tmp, "tls.crt")
            Path(cert).write_bytes(ep.cert_data)
        if ep.key_data is not None:
            key = os.path.join(tmp, "tls.key")
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(ep.key_data)
        ctx.load_cert_chain(cert or "", key)


def kubeconfig_path(explicit: str | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The file to read and whether it was named (explicitly or by $KUBECONFIG)."""
    if explicit:
        return Path(explicit), True
    paths = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if len(paths) > 1:
        raise NeedsFullLoader("$KUBECONFIG names several files (they are merged)")
    if paths:
        return Path(paths[0]).expanduser(), False
    return Path(env.get("HOME") or Path.home()) / ".kube" / "config", False


def load(kubeconfig: str | None = None, context: str | None = None, env: Mapping[str, str] | None = None,
         sa_dir: Path = SA_DIR) -> Endpoint:  # fmt: skip
    """The kubeconfig when given (else $KUBECONFIG, else ~/.kube/config), else in-cluster.

    A named file that is missing or wrong is an error. A default one that is missing means
    in-cluster; one that is wrong, too, when in a pod (as ``kubernetes_asyncio`` does), and
    an error naming the kubeconfig's fault otherwise.
    """
    env = os.environ if env is None else env
    path, named = kubeconfig_path(kubeconfig, env)
    try:
        allow = str(env.get(ALLOW_HTTP_TOKEN, "")).strip().lower() in ("1", "true", "yes")
        return from_file(path, context, named or context is not None, allow_http_token=allow)
    except NoKubeconfig:
        if named:
            raise KubeconfigError(f"kubeconfig {path} does not exist") from None
        return in_cluster(env, sa_dir)
    except KubeconfigError:
        if named or context is not None or not env.get("KUBERNETES_SERVICE_HOST"):
            raise
        return in_cluster(env, sa_dir)


def from_file(path: Path, context: str | None = None, must_exist: bool = True, allow_http_token: bool = False) -> Endpoint:
    import yaml  # only here: in-cluster controllers never read YAML

    try:
        text = path.read_text()
    except FileNotFoundError:
        raise NoKubeconfig(str(path)) from None
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML{where}") from None
    if doc is None and not must_exist:
        raise NoKubeconfig(str(path))  # an empty default file: as kubernetes_asyncio, try in-cluster
    # Not resolve(): a kubeconfig mounted from a Secret is a symlink into a directory that is
    # replaced on rotation; relative paths follow the link name, as kubectl resolves them.
    return parse(doc, Path(os.path.abspath(path)).parent, context, f"kubeconfig {path}", allow_http_token=allow_http_token)


def _named(doc: dict[str, Any], section: str, name: str, what: str, source: str) -> dict[str, Any]:
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise KubeconfigError(f"{source}: '{section}' must be a list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(what)
            if value is None:
                return {}
            if not isinstance(value, dict):
                raise KubeconfigError(f"{source}: {what} {name!r} must be a mapping")
            return value
    raise KubeconfigError(f"{source}: no {what} named {name!r}")


def _file(base: Path, value: Any, key: str, source: str) -> str:
    if not isinstance(value, str) or not value:
        raise KubeconfigError(f"{source}: {key} must be a file path")
    return os.path.normpath(base / value)  # an absolute value stays as it is


def _data(value: Any, key: str, source: str) -> bytes:
    try:
        return base64.b64decode("".join(str(value).split()), validate=True)  # YAML block scalars wrap lines
    except (binascii.Error, ValueError):
        raise KubeconfigError(f"{source}: {key} is not valid base64") from None


def parse(doc: Any, base: Path, context: str | None, source: str, allow_http_token: bool = False) -> Endpoint:
    """The endpoint a kubeconfig document (already parsed YAML) names for ``context``."""
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{source} is not a kubeconfig (a mapping with clusters, users and contexts)")
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(f"{source} has no current-context; pass --context")
    source = f"{source} (context {name})"
    ctx = _named(doc, "contexts", name, "context", source)
    if not ctx.get("cluster"):
        raise KubeconfigError(f"{source}: the context names no cluster")
    cluster = _named(doc, "clusters", ctx["cluster"], "cluster", source)
    user: dict[str, Any] = {}
    if ctx.get("user"):
        try:
            user = _named(doc, "users", ctx["user"], "user", source)
        except KubeconfigError:
            user = {}  # kubernetes_asyncio and kubectl go on without credentials
    for key in CLUSTER_FALLBACK:
        if cluster.get(key):
            raise NeedsFullLoader(f"cluster uses {key}")
    for key in USER_FALLBACK:
        if user.get(key):
            raise NeedsFullLoader(f"user uses {key}")
    server = cluster.get("server")
    if not isinstance(server, str) or "://" not in server:
        raise KubeconfigError(f"{source}: the cluster's server must be a URL such as https://host:6443")
    # The scheme is case-insensitive (RFC 3986): "HTTP://" is plain http, and was let through the
    # token check below, which compared it as written. Normalised here, every check sees "http".
    scheme, rest = server.split("://", 1)
    if scheme.lower() not in ("http", "https"):
        raise KubeconfigError(f"{source}: the cluster's server must be an http or https URL, not {scheme}://")
    server = f"{scheme.lower()}://{rest}".rstrip("/")
    tls: dict[str, Any] = {}
    if server.startswith("https"):
        # An empty value counts as absent, as client-go reads it (len > 0).
        if cluster.get("certificate-authority-data"):
            data = cluster["certificate-authority-data"]
            tls["ca_data"] = _data(data, "certificate-authority-data", source).decode("ascii", "replace")
        elif cluster.get("certificate-authority"):
            tls["ca_file"] = _file(base, cluster["certificate-authority"], "certificate-authority", source)
        for key, attr in (("client-certificate", "cert"), ("client-key", "key")):
            if user.get(f"{key}-data"):
                tls[f"{attr}_data"] = _data(user[f"{key}-data"], f"{key}-data", source)
            elif user.get(key):
                tls[f"{attr}_file"] = _file(base, user[key], key, source)
        if bool(tls.get("cert_file") or tls.get("cert_data")) != bool(tls.get("key_file") or tls.get("key_data")):
            raise KubeconfigError(f"{source}: a client certificate needs its key, and a key its certificate")
    if (user.get("token") or user.get("tokenFile")) and server.startswith("http://") and not allow_http_token:
        raise KubeconfigError(f"{source}: refusing to send a bearer token to {server} over plain http (anyone on "
                              f"the path could read it); use https, or set {ALLOW_HTTP_TOKEN}=true if the path is "
                              "trusted (a local proxy)")  # fmt: skip
    token: TokenSource | None = None
    if user.get("token"):
        token = TokenSource(str(user["token"]))
    elif user.get("tokenFile"):
        token = TokenSource(path=_file(base, user["tokenFile"], "tokenFile", source))
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise KubeconfigError(f"{source}: insecure-skip-tls-verify must be true or false")
    if insecure and (cluster.get("certificate-authority-data") or cluster.get("certificate-authority")):
        raise KubeconfigError(f"{source}: insecure-skip-tls-verify together with a certificate authority: the CA "
                              "would be ignored; remove one of them")  # fmt: skip
    server_name = cluster.get("tls-server-name") or None
    return Endpoint(server=server, insecure=insecure, tls_server_name=server_name, token=token, source=source, **tls)


def in_cluster(env: Mapping[str, str], sa_dir: Path = SA_DIR) -> Endpoint:
    """The API server a pod reaches through its service account."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeconfigError("no kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config) and not in a pod "
                              "(KUBERNETES_SERVICE_HOST/PORT are not set)")  # fmt: skip
    if ":" in host or "%" in host:
        host = f"[{host}]"  # IPv6
    ca = sa_dir / "ca.crt"
    if not ca.is_file() or not ca.stat().st_size:
        raise KubeconfigError(f"in-cluster: the service account's CA {ca} is missing or empty")
    token = TokenSource(path=str(sa_dir / "token"))
    return Endpoint(server=f"https://{host}:{port}", ca_file=str(ca), token=token, source="in-cluster")
