"""The progress endpoint's TLS as the chart makes it (progress.push.tls.source=helm): a CA, and a
serving certificate it signed for the Service's in-cluster names, usable by a real TLS server and
client (docs/install.md, "Progress pushed by replicas"). That the CA survives an upgrade (read back
with `lookup`) needs a cluster: tests/deploy/test_progress_push.py."""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support.chart import by_kind, render

NS = "ml-platform"


def _secret(release: str = "airflow-t9k", **values) -> dict[str, bytes]:
    objs = render({"crds.install": False, **values}, namespace=NS, release=release)
    (secret,) = by_kind(objs, "Secret")
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


@pytest.fixture(scope="module")
def made() -> dict[str, bytes]:
    return _secret()


def test_the_certificate_names_the_service_and_is_signed_by_the_ca(made):
    ca = x509.load_pem_x509_certificate(made["ca.crt"])
    cert = x509.load_pem_x509_certificate(made["tls.crt"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    svc = "airflow-t9k-controller-progress"
    assert names == [f"{svc}.{NS}.svc", f"{svc}.{NS}.svc.cluster.local"]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages
    days = (cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)).days
    assert 390 < days <= 397  # progress.push.tls.certDays: a serving certificate of about a year, not ten


def test_certificate_days_and_a_release_of_another_name(made):
    other = _secret(release="ml", **{"progress.push.tls.certDays": 30})
    cert = x509.load_pem_x509_certificate(other["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert names[0] == f"ml-airflow-t9k-controller-progress.{NS}.svc"
    assert (cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)).days <= 30
    assert other["ca.crt"] != made["ca.crt"]  # no cluster to look the old one up in: a new CA


def test_a_real_tls_handshake_with_the_files_as_the_controller_and_a_replica_use_them(made, tmp_path):
    """The controller loads tls.crt/tls.key (controller/tls.py's way); a client trusting only ca.crt,
    as the helper does, verifies it under the Service's name."""
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_bytes(made[name])
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    host = f"airflow-t9k-controller-progress.{NS}.svc"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok")

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        with socket.create_connection(("127.0.0.1", port)) as raw, client_ctx.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.recv(2) == b"ok"
        t.join(5)
    with socket.create_server(("127.0.0.1", 0)) as listener:  # another name: refused
        port = listener.getsockname()[1]

        def serve_once() -> None:
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

        t = threading.Thread(target=serve_once, daemon=True)
        t.start()
        with socket.create_connection(("127.0.0.1", port)) as raw, pytest.raises(ssl.SSLCertVerificationError):
            client_ctx.wrap_socket(raw, server_hostname="airflow-t9k-controller-progress.other.svc")
        t.join(5)
