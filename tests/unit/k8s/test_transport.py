"""The direct transport against a loopback HTTPS server with certificates of its own (CA,
server name, client certificates), the fallback to kubernetes_asyncio, and what the controller
process imports."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
import os
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from airflow_t9k.controller.cli import log_pool_size
from airflow_t9k.controller.metrics import InstrumentedKube, Metrics, NotLeader
from airflow_t9k.k8s import client as kclient
from airflow_t9k.k8s.client import ApiClientTransport, DirectTransport, Kube, load_transport
from airflow_t9k.k8s.errors import ApiError
from airflow_t9k.k8s.kubeconfig import KubeconfigError

SECRET = "s3cr3t-t0ken-value"
ROOT = Path(__file__).resolve().parents[3]


def _cert(name: str, key: Any, issuer: x509.Name | None = None, issuer_key: Any = None, ca: bool = False,
          sans: list[x509.GeneralName] | None = None) -> x509.Certificate:  # fmt: skip
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer or subject).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
         .not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))  # fmt: skip
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                                          encipher_only=False, decipher_only=False), critical=True)  # fmt: skip
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key or key, hashes.SHA256())


def pem(obj: Any) -> bytes:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test-ca", ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert("kube.test", srv_key, ca.subject, ca_key, sans=[x509.DNSName("kube.test")])  # not 127.0.0.1
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = _cert("controller", cli_key, ca.subject, ca_key)
    (d / "ca.crt").write_bytes(pem(ca))
    (d / "srv.crt").write_bytes(pem(srv))
    (d / "srv.key").write_bytes(pem(srv_key))
    return {"dir": d, "ca": pem(ca), "client_crt": pem(cli), "client_key": pem(cli_key)}


def server_ssl(pki: dict[str, Any], client_certs: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki["dir"] / "ca.crt"))
    ctx.load_cert_chain(pki["dir"] / "srv.crt", pki["dir"] / "srv.key")
    ctx.verify_mode = ssl.CERT_REQUIRED if client_certs else ssl.CERT_NONE
    return ctx


def kubeconfig_doc(server: str, cluster: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": server, **cluster}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}  # fmt: skip


class Api:
    """Records what arrives; answers like the API server."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        self.seen.append({"method": request.method, "path": request.path, "query": request.raw_path.partition("?")[2],
                          "auth": request.headers.get("Authorization"), "ctype": request.headers.get("Content-Type"),
                          "body": json.loads(body) if body else None, "client_cert": bool(peer)})  # fmt: skip
        if request.path.endswith("/missing"):
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound", "message": "gone"}, status=404)
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"é": "☃"}})


async def serve(api: Api, ctx: ssl.SSLContext | None) -> TestServer:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=ctx)
    return server


CA_B64 = "certificate-authority-data"

TLS_CASES = [
    ("CA data and tls-server-name", lambda p: ({CA_B64: base64.b64encode(p["ca"]).decode(), "tls-server-name": "kube.test"},
                                               {"token": SECRET}), False, True),
    ("CA file relative to the kubeconfig", lambda p: ({"certificate-authority": "pki-ca.crt", "tls-server-name": "kube.test"},
                                                      {"token": SECRET}), False, True),
    ("wrong name: refused", lambda p: ({CA_B64: base64.b64encode(p["ca"]).decode()}, {"token": SECRET}), False, False),
    ("unknown CA: refused", lambda p: ({"tls-server-name": "kube.test"}, {"token": SECRET}), False, False),
    ("insecure-skip-tls-verify", lambda p: ({"insecure-skip-tls-verify": True}, {"token": SECRET}), False, True),
    ("client certificate data", lambda p: ({CA_B64: base64.b64encode(p["ca"]).decode(), "tls-server-name": "kube.test"},
                                           {"client-certificate-data": base64.b64encode(p["client_crt"]).decode(),
                                            "client-key-data": base64.b64encode(p["client_key"]).decode()}), True, True),
    ("no client certificate where one is required", lambda p: ({"insecure-skip-tls-verify": True}, {"token": SECRET}),
     True, False),
]  # fmt: skip


@pytest.mark.asyncio
@pytest.mark.parametrize(("make", "client_certs", "works"), [c[1:] for c in TLS_CASES], ids=[c[0] for c in TLS_CASES])
async def test_tls_settings_reach_the_connection(tmp_path, pki, make, client_certs, works):
    (tmp_path / "pki-ca.crt").write_bytes(pki["ca"])
    api = Api()
    server = await serve(api, server_ssl(pki, client_certs))
    cluster, user = make(pki)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_doc(f"https://127.0.0.1:{server.port}", cluster, user)))
    transport = await load_transport(str(path))
    assert isinstance(transport, DirectTransport)
    kube = Kube(transport)
    try:
        if works:
            assert await kube.get("/api/v1/namespaces/ns/configmaps/x") == {"kind": "ConfigMap", "metadata": {"name": "x"},
                                                                           "data": {"é": "☃"}}  # fmt: skip
            assert api.seen[0]["client_cert"] == client_certs
            assert api.seen[0]["auth"] == (f"Bearer {SECRET}" if "token" in user else None)
        else:
            with pytest.raises(Exception) as err:  # noqa: PT011 - TLS, 401, ...: only what it says is checked
                await kube.get("/api/v1/namespaces/ns/configmaps/x")
            assert SECRET not in str(err.value)
            assert not api.seen
    finally:
        await kube.close()
        await server.close()


async def some_calls(kube: Kube) -> None:
    await kube.get("/api/v1/pods", query={"labelSelector": "a in (x,y),b!=c", "watch": False, "limit": 5, "x": None})
    await kube.get("/api/v1/pods", query={"fieldSelector": "metadata.name=x/é", "continue": "eyJ2Ijoi+/="})
    await kube.create("/api/v1/namespaces/ns/configmaps", body={"data": {"k": "é ☃"}})
    await kube.patch("/api/v1/namespaces/ns/configmaps/x", body={"data": None})
    await kube.delete("/api/v1/namespaces/ns/configmaps/x", uid="u1")
    with pytest.raises(ApiError) as err:
        await kube.get("/api/v1/namespaces/ns/configmaps/missing")
    assert err.value.status == 404
    assert SECRET not in str(err.value)


@pytest.mark.asyncio
async def test_requests_are_the_ones_apiclient_sends(tmp_path, caplog, monkeypatch):
    """Query, headers and JSON bodies as kubernetes_asyncio sends them; the same answers,
    status codes and metrics; nothing secret in the logs or errors."""
    from kubernetes_asyncio import client as k8s_client

    monkeypatch.setenv("T9K_ALLOW_HTTP_TOKEN", "true")  # the fake API server is plain http on loopback

    caplog.set_level(logging.DEBUG)
    api = Api()
    server = await serve(api, None)
    host = f"http://127.0.0.1:{server.port}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_doc(host, {}, {"token": SECRET})))
    metrics = Metrics()
    kube = InstrumentedKube(await load_transport(str(path)), metrics)
    assert kube.host == f"127.0.0.1:{server.port}"
    config = k8s_client.Configuration(host=host, api_key={"BearerToken": f"Bearer {SECRET}"})
    reference = Kube(k8s_client.ApiClient(config))
    try:
        await some_calls(kube)
        direct, api.seen = api.seen, []
        await some_calls(reference)
    finally:
        await kube.close()
        await reference.close()
        await server.close()
    assert direct == api.seen
    assert direct[0]["query"] == "labelSelector=a+in+(x,y),b!%3Dc&watch=false&limit=5"  # as yarl normalizes it
    assert [(s["method"], s["ctype"], s["body"]) for s in direct[2:5]] == [
        ("POST", "application/json", {"data": {"k": "é ☃"}}),
        ("PATCH", "application/merge-patch+json", {"data": None}),
        ("DELETE", "application/json", {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                                        "preconditions": {"uid": "u1"}}),
    ]  # fmt: skip
    assert all(s["auth"] == f"Bearer {SECRET}" for s in direct)
    assert SECRET not in caplog.text
    labels = {(s.labels["code"], s.labels["method"]) for m in metrics.requests.collect() for s in m.samples
              if s.name.endswith("_total")}  # fmt: skip
    assert {("200", "GET"), ("200", "POST"), ("404", "GET")} <= labels


@pytest.mark.asyncio
async def test_what_the_lean_loader_cannot_read_goes_to_kubernetes_asyncio(tmp_path, monkeypatch):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_doc("https://127.0.0.1:1", {"proxy-url": "http://127.0.0.1:3"}, {"token": SECRET})))
    transport = await load_transport(str(path))
    try:
        assert isinstance(transport, ApiClientTransport)
        assert transport.api.configuration.proxy == "http://127.0.0.1:3"
    finally:
        await transport.close()
    path.write_text(yaml.safe_dump(kubeconfig_doc("https://10.1.2.3:6443", {}, {"token": SECRET})))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3")  # aiohttp's trust_env honoured it: so does the fallback
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    transport = await load_transport(str(path))
    try:
        assert isinstance(transport, ApiClientTransport)
    finally:
        await transport.close()
    monkeypatch.setenv("NO_PROXY", "10.1.2.3")
    transport = await load_transport(str(path))
    assert isinstance(transport, DirectTransport)
    await transport.close()


@pytest.mark.asyncio
async def test_without_kubernetes_asyncio_what_needs_it_is_a_clear_error(tmp_path, monkeypatch):
    """The controller's image leaves kubernetes_asyncio out: a kubeconfig only its loader reads says so."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "kubernetes_asyncio" else real(name, *a))
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_doc("https://127.0.0.1:1", {"proxy-url": "http://127.0.0.1:3"}, {"token": SECRET})))
    with pytest.raises(KubeconfigError, match="needs kubernetes_asyncio's loader, which is not installed here") as err:
        await load_transport(str(path))
    assert "proxy-url" in str(err.value)
    assert SECRET not in str(err.value)


@pytest.mark.asyncio
async def test_a_bad_kubeconfig_is_a_clear_error(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_doc("https://127.0.0.1:1", {CA_B64: base64.b64encode(b"junk").decode()},
                                                  {"token": SECRET})))  # fmt: skip
    with pytest.raises(KubeconfigError, match=r"kubeconfig .* \(context c\): the certificate authority cannot be loaded") as err:
        await load_transport(str(path))
    assert SECRET not in str(err.value)


def test_the_controller_cli_exits_2_on_a_bad_kubeconfig_and_logs_no_secret(tmp_path):
    path = tmp_path / "kubeconfig"
    doc = kubeconfig_doc("127.0.0.1:1", {}, {"token": SECRET})  # no scheme
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run([sys.executable, "-m", "airflow_t9k.cli", "controller", "--kubeconfig", str(path),
                          "--health-port", "0", "--metrics-port", "0", "--log-level", "DEBUG"], check=False, cwd=ROOT,
                         capture_output=True,
                         text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "the cluster's server must be a URL" in out.stderr
    assert SECRET not in out.stderr + out.stdout


LEAN = textwrap.dedent(
    """
    import asyncio, json, sys
    import airflow_t9k.controller.cli
    from airflow_t9k.k8s.client import connect

    seen = []

    async def handle(reader, writer):
        head = await reader.readuntil(b"\\r\\n\\r\\n")
        seen.append(head.decode())
        body = b'{"major":"1","minor":"36"}'
        writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: "
                     + str(len(body)).encode() + b"\\r\\n\\r\\n" + body)
        await writer.drain()
        writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        open(sys.argv[1], "w").write(json.dumps({
            "current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "u", "user": {"token": "tok"}}]}))
        kube = await connect(sys.argv[1])
        version = await kube.get("/version")
        await kube.close()
        server.close()
        return version

    version = asyncio.run(main())
    print(json.dumps({"version": version, "auth": "Authorization: Bearer tok" in seen[0],
                      "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "kubernetes_asyncio"))}))
    """
)


def test_the_controller_process_imports_no_kubernetes_client_library(tmp_path):
    env = {**os.environ, "T9K_ALLOW_HTTP_TOKEN": "true"}  # the fake API server is plain http on loopback
    out = subprocess.run([sys.executable, "-c", LEAN, str(tmp_path / "kubeconfig")], cwd=ROOT, capture_output=True, env=env,
                         text=True, timeout=60, check=True)  # fmt: skip
    got = json.loads(out.stdout)
    assert got == {"version": {"major": "1", "minor": "36"}, "auth": True, "modules": []}


@pytest.mark.asyncio
async def test_kube_still_takes_an_apiclient():
    from kubernetes_asyncio import client as k8s_client

    kube = kclient.Kube(k8s_client.ApiClient(k8s_client.Configuration(host="http://127.0.0.1:9")))
    assert isinstance(kube.transport, ApiClientTransport)
    assert kube.transport.host == "http://127.0.0.1:9"
    await kube.close()


@pytest.mark.asyncio
async def test_a_dry_run_is_neither_fenced_nor_counted_as_a_write(tmp_path, monkeypatch):
    """A standby's feature probe at start (a dry-run pod) must not read as a write it made."""
    monkeypatch.setenv("T9K_ALLOW_HTTP_TOKEN", "true")
    server = await serve(Api(), None)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_doc(f"http://127.0.0.1:{server.port}", {}, {"token": SECRET})))
    metrics = Metrics()
    leading = [False]
    kube = InstrumentedKube(await load_transport(str(path)), metrics, fence=lambda: leading[0])

    def writes() -> float:
        return sum(s.value for m in metrics.writes.collect() for s in m.samples if s.name.endswith("_total"))

    try:
        await kube.request("POST", "/api/v1/namespaces/ns/pods", query={"dryRun": "All"}, body={"kind": "Pod"})
        assert writes() == 0
        with pytest.raises(NotLeader, match="not the leader"):
            await kube.create("/api/v1/namespaces/ns/configmaps", body={"data": {}})
        leading[0] = True
        await kube.create("/api/v1/namespaces/ns/configmaps", body={"data": {}})
        assert writes() == 1
    finally:
        await kube.close()
        await server.close()


POOL_CASES = [
    ("the default: 100, the rest wait", {}, 120, 100),
    ("one per stream and some", {"connections": 140}, 120, 120),
    ("no bound (the controller's main pool: its watches)", {"connections": 0}, 120, 120),
    ("the controller's log pool with --progress-streams 120", {"connections": log_pool_size(1.0, 120)}, 120, 120),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("kwargs", "opened", "held"), [c[1:] for c in POOL_CASES], ids=[c[0] for c in POOL_CASES])
async def test_the_pool_holds_as_many_long_lived_requests_as_it_is_given(tmp_path, monkeypatch, kwargs, opened, held):
    """A followed log or a watch holds its connection until it ends; a request past the pool's
    bound waits for one to free. The controller's log pool once kept the default 100 while it
    opened up to --progress-streams (200) streams: a stream past the 100th read nothing until its
    10-minute timeout."""
    monkeypatch.setenv("T9K_ALLOW_HTTP_TOKEN", "true")
    arrived = 0
    release = asyncio.Event()

    async def hold(request: web.Request) -> web.StreamResponse:
        nonlocal arrived
        arrived += 1
        await release.wait()
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/{tail:.*}", hold)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_doc(f"http://127.0.0.1:{server.port}", {}, {"token": SECRET})))
    transport = await load_transport(str(path), **kwargs)
    tasks = [asyncio.ensure_future(transport.send("GET", f"/log/{i}", [], {}, None, 30)) for i in range(opened)]
    try:
        for _ in range(100):  # until no more arrive
            before = arrived
            await asyncio.sleep(0.05)
            if arrived == before and arrived >= min(opened, 100):
                break
        await asyncio.sleep(0.3)
        assert arrived == held
    finally:
        release.set()
        for resp in await asyncio.gather(*tasks, return_exceptions=True):
            if not isinstance(resp, BaseException):
                resp.release()
        await transport.close()
        await server.close()
