"""The progress endpoint's TLS kept by the controllers in a Secret (docs/progress.md, "TLS"),
against the real API server: its write preconditions decide a race between replicas (one CA),
its watch brings an edit to every replica, and the one SSLContext the listener holds serves the
renewed certificate to new connections while an open one goes on. Then the controller as a
process, with the flags the chart gives it: pods get the Secret's CA, and a certificate edited to
expire soon is renewed under the same CA and served. Without a cluster: tests/unit/controller/
test_certs.py (the decisions) and test_cert_secret.py."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from airflow_t9k.controller import tls as tls_mod
from airflow_t9k.controller.cert_secret import CertSecret, decode
from airflow_t9k.controller.certs import issue, key_bytes, new_ca, plan_certs, usable_cas
from airflow_t9k.k8s.client import Kube, load_api_client
from airflow_t9k.k8s.errors import AlreadyExists, Conflict
from tests.support.cluster import wait_until
from tests.support.push import CA_ANNOTATION, FROM_HERE, env_of, post, push_flags, token

NAME = "airflow-t9k-controller-progress-certs"
HOST = "ctl-progress.ml.svc"
DAY = datetime.timedelta(days=1)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _empty(namespace: str) -> dict:
    """The Secret as the chart renders it."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": NAME, "namespace": namespace}, "type": "Opaque"}


def _encoded(data: dict[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in data.items()}


async def _kubes(cluster, n: int) -> list[Kube]:
    """One client per replica: their own connections, as two pods have."""
    return [Kube(await load_api_client(str(cluster.kubeconfig))) for _ in range(n)]


async def _peer(port: int, ca_pem: str) -> x509.Certificate:
    """The certificate a client trusting ``ca_pem`` gets from the listener on ``port``."""
    ctx = ssl.create_default_context(cadata=ca_pem)
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=HOST)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(100):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("rendered", [True, False], ids=["the chart's empty Secret", "no Secret"])
async def test_two_replicas_racing_end_with_one_ca_and_the_loser_reads_again(cluster, namespace, rendered):
    a_kube, b_kube, check = await _kubes(cluster, 3)
    path = f"/api/v1/namespaces/{namespace}/secrets"
    try:
        if rendered:
            await check.create(path, body=_empty(namespace))
        a, b = (CertSecret(k, namespace, NAME, [HOST], tls_mod.empty()) for k in (a_kube, b_kube))
        # Both read before either writes (what two replicas starting together do), then both write:
        # the API server takes the first and refuses the second's stale precondition.
        seen_a, seen_b = await a.read(), await b.read()
        for seen, keeper in ((seen_a, a), (seen_b, b)):
            planned = plan_certs(decode(seen), [HOST], _now())
            assert planned is not None
            if keeper is a:
                await keeper.write(seen, planned)
            else:
                with pytest.raises((Conflict, AlreadyExists)):  # a stale resourceVersion, or a taken name
                    await keeper.write(seen, planned)
        await asyncio.gather(a.sync(), b.sync())  # the loser reads again and keeps what it finds
        assert a.writes == b.writes == 0
        stored = decode(await check.get(f"{path}/{NAME}"))
        assert len(usable_cas(stored["ca.crt"], stored["ca.key"], _now())) == 1
        assert a.tls.ca_pem == b.tls.ca_pem == stored["ca.crt"].decode()
        assert a.tls.loaded == b.tls.loaded == stored["tls.crt"] + stored["tls.key"]

        # And a race left to the loop: four replicas at once on a fresh Secret, one CA.
        await check.delete(f"{path}/{NAME}")
        keepers = [CertSecret(k, namespace, NAME, [HOST], tls_mod.empty()) for k in (a_kube, b_kube, a_kube, b_kube)]
        await asyncio.gather(*(k.sync() for k in keepers))
        stored = decode(await check.get(f"{path}/{NAME}"))
        assert sum(k.writes for k in keepers) == 1
        assert {k.tls.ca_pem for k in keepers} == {stored["ca.crt"].decode()}
    finally:
        for k in (a_kube, b_kube, check):
            await k.close()


@pytest.mark.asyncio
async def test_an_edit_to_an_expiring_certificate_is_renewed_and_served_on_the_same_listener(cluster, namespace):
    kube, check = await _kubes(cluster, 2)
    path = f"/api/v1/namespaces/{namespace}/secrets/{NAME}"
    bundles: list[str] = []
    keeper = CertSecret(kube, namespace, NAME, [HOST], tls_mod.empty(), every=30, on_bundle=bundles.append)
    try:
        await check.create(f"/api/v1/namespaces/{namespace}/secrets", body=_empty(namespace))
        await keeper.start()
        server = await asyncio.start_server(_echo, "127.0.0.1", 0, ssl=keeper.tls.context)
        port = server.sockets[0].getsockname()[1]
        task = asyncio.create_task(keeper.run())
        try:
            first = decode(await check.get(path))
            assert (await _peer(port, first["ca.crt"].decode())).public_bytes(Encoding.PEM) == first["tls.crt"]
            ctx = ssl.create_default_context(cadata=first["ca.crt"].decode())
            open_reader, open_writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=HOST)

            # Someone (or a replica's clock) makes the certificate one near its end: 80 of 90 days gone.
            (ca,) = usable_cas(first["ca.crt"], first["ca.key"], _now())
            cert_pem, key_pem = issue(ca, [HOST], _now() - 80 * DAY)
            secret = await check.get(path)
            secret["data"] = _encoded({**first, "tls.crt": cert_pem, "tls.key": key_pem})
            await check.replace(path, body=secret)

            async def renewed() -> dict[str, bytes] | None:
                now = decode(await check.get(path))
                fresh = now["tls.crt"] not in (cert_pem, first["tls.crt"])
                return now if fresh and keeper.tls.loaded == now["tls.crt"] + now["tls.key"] else None

            after = await _wait_for(renewed)
            assert after["ca.crt"] == first["ca.crt"]  # renewed under the same CA: every pod still trusts it
            assert plan_certs(after, [HOST], _now()) is None
            served = await _peer(port, first["ca.crt"].decode())  # a new connection, the pod's old bundle
            assert served.public_bytes(Encoding.PEM) == after["tls.crt"]
            assert served.not_valid_after_utc - _now() > 89 * DAY
            open_writer.write(b"still here")  # the connection opened before the renewal goes on
            await open_writer.drain()
            assert await asyncio.wait_for(open_reader.readexactly(10), 5) == b"still here"
            open_writer.close()

            # A CA near its end (7 of 10 years gone): a successor joins the bundle, handed on for the
            # pods created next; the certificate stays the old CA's, which pods holding only it trust.
            old = new_ca(_now() - 7 * 365 * DAY)
            cert_pem, key_pem = issue(old, [HOST], _now() - DAY)
            old_bundle = old.cert.public_bytes(Encoding.PEM)
            secret = await check.get(path)
            secret["data"] = _encoded({"ca.crt": old_bundle, "ca.key": key_bytes(old.key), "tls.crt": cert_pem,
                                       "tls.key": key_pem})  # fmt: skip
            await check.replace(path, body=secret)
            rotated = await _wait_for(lambda: _two_cas(check, path))
            assert rotated["ca.crt"].startswith(old_bundle)
            assert rotated["tls.crt"] == cert_pem
            await _wait_for(lambda: _true(bundles[-1] == rotated["ca.crt"].decode()))
            assert (await _peer(port, old_bundle.decode())).public_bytes(Encoding.PEM) == cert_pem
            assert (await _peer(port, rotated["ca.crt"].decode())).public_bytes(Encoding.PEM) == cert_pem
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            server.close()
    finally:
        await kube.close()
        await check.close()


async def _two_cas(check: Kube, path: str) -> dict[str, bytes] | None:
    data = decode(await check.get(path))
    return data if len(usable_cas(data.get("ca.crt"), data.get("ca.key"), _now())) == 2 else None


async def _wait_for(probe, timeout: float = 20.0):
    """What ``probe()`` (a coroutine) returns once it is truthy; the watch brings an edit within moments."""
    for _ in range(int(timeout * 10)):
        found = await probe()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError("timed out")


async def _true(value: bool) -> bool:
    return value


def test_the_controller_keeps_the_secret_pods_get_its_ca_and_an_expiring_certificate_is_renewed(
    cluster, jobs, core, controller_factory
):
    """The controller as the chart runs it, less the Deployment: --progress-tls-secret on the
    chart's empty Secret. Its endpoint serves the Secret's certificate; a replica's pod gets the
    Secret's CA bundle and pushes with it; a certificate edited to expire soon is renewed under
    the same CA within moments, and the pod's bundle verifies the new one."""
    ns = jobs.ns
    core.create_namespaced_secret(ns, _empty(ns))
    port, flags = push_flags(check_source=not cluster.external)
    controller_factory("--progress-interval", "2", *flags, "--progress-tls-secret", f"{ns}/{NAME}")

    def stored() -> dict[str, bytes]:
        return {k: base64.b64decode(v) for k, v in (core.read_namespaced_secret(NAME, ns).data or {}).items()}

    first = stored()
    assert plan_certs(first, ["127.0.0.1"], _now()) is None  # made at start, for the URL's host
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "push"},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": {
                     **FROM_HERE, "containers": [{"name": "main", "image": "busybox"}]}}}]}})  # fmt: skip
    jobs.wait_phase("GenericJob", "push", "Running")
    (pod,) = jobs.live_pods("push").values()
    bundle = pod.metadata.annotations[CA_ANNOTATION]
    assert bundle == first["ca.crt"].decode()
    url = env_of(pod)["T9K_PROGRESS_URL"]
    code, answer = post(url, token(jobs.core, ns, pod), {"step": 1, "loss": 1.0}, bundle)
    assert code == 200, answer

    (ca,) = usable_cas(first["ca.crt"], first["ca.key"], _now())
    cert_pem, key_pem = issue(ca, ["127.0.0.1"], _now() - 80 * DAY)
    secret = core.read_namespaced_secret(NAME, ns)
    secret.data = _encoded({**first, "tls.crt": cert_pem, "tls.key": key_pem})
    core.replace_namespaced_secret(NAME, ns, secret)
    after = wait_until(lambda: (s := stored())["tls.crt"] not in (cert_pem, first["tls.crt"]) and s, timeout=30,
                       what="the controller's renewal")  # fmt: skip
    assert after["ca.crt"] == first["ca.crt"]

    def served() -> x509.Certificate:
        return x509.load_pem_x509_certificate(ssl.get_server_certificate(("127.0.0.1", port)).encode())

    wait_until(lambda: served() == x509.load_pem_x509_certificate(after["tls.crt"]), timeout=30,
               what="the renewed certificate served")  # fmt: skip
    code, answer = post(url, token(jobs.core, ns, pod), {"step": 2, "loss": 0.5}, bundle)  # the pod's bundle from before
    assert code == 200, answer
