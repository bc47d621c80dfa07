"""controller/push_setup.py and tls.py: the push path's flags, the serving certificate from files
(read again when they change) or made at start."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from airflow_t9k.controller import tls
from airflow_t9k.controller.push_setup import BadFlags, add_push_arguments, push_setup


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--progress-interval", type=float, default=10.0)
    add_push_arguments(p)
    return p.parse_args(list(argv))


def write_pair(tmp: Path, host: str = "127.0.0.1") -> tuple[Path, Path, str]:
    """A self-signed certificate for ``host`` and its key as files; the certificate as PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .sign(key, hashes.SHA256()))  # fmt: skip
    pem = serialization.Encoding.PEM
    (tmp / "tls.crt").write_bytes(cert.public_bytes(pem))
    (tmp / "tls.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return tmp / "tls.crt", tmp / "tls.key", cert.public_bytes(pem).decode()


def test_off_by_default():
    assert push_setup(parse()) is None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--progress-endpoint", "http://10.88.0.1:8443"], "must be an https:// URL"),
        (["--progress-endpoint", "https://"], "must be an https:// URL"),
        (["--progress-endpoint", "https://h:8443", "--progress-interval", "0"], "needs --progress-interval > 0"),
        (["--progress-endpoint", "https://h:8443", "--progress-push-rate", "0"], "--progress-push-rate must be > 0"),
        (["--progress-endpoint", "https://h:8443", "--progress-tls-cert", "/x"], "go together"),
        (["--progress-endpoint", "https://h:8443", "--progress-tls-ca", "/x"], "needs --progress-tls-cert"),
        (["--progress-tls-cert", "/x", "--progress-tls-key", "/y"], "need --progress-endpoint"),
        (["--progress-endpoint", "https://h:8443", "--progress-tls-cert", "/missing", "--progress-tls-key", "/missing"],
         "progress endpoint TLS"),
        (["--progress-tls-secret", "ns/s"], "need --progress-endpoint"),
        (["--progress-endpoint", "https://h:8443", "--progress-tls-secret", "ns/s", "--progress-tls-cert", "/x",
          "--progress-tls-key", "/y"], "one of the two"),
        (["--progress-endpoint", "https://h:8443", "--progress-tls-secret", "ns/s", "--progress-tls-ca", "/x"], "one of the two"),
        (["--progress-endpoint", "https://h:8443", "--progress-tls-secret", "s"], "give NAMESPACE/NAME when not running"),
        (["--progress-endpoint", "https://h:8443", "--progress-tls-secret", "ns/s", "--progress-tls-cert-days", "3650"],
         "less than --progress-tls-ca-days"),
        (["--progress-endpoint", "https://h:8443", "--progress-tls-dns-name", "h"], "needs --progress-tls-secret"),
    ],
)  # fmt: skip
def test_flags_that_do_not_go_together_are_refused_with_the_reason(argv, words, monkeypatch):
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    with pytest.raises(BadFlags, match=words):
        push_setup(parse(*argv))


def test_made_at_start_for_the_urls_host_and_a_path_prefix_kept():
    target, serving = push_setup(parse("--progress-endpoint", "https://10.88.0.1:8443/prefix/"))
    assert (target.endpoint, target.audience, serving.files) == ("https://10.88.0.1:8443/prefix", "airflow-t9k-progress", None)
    assert target.ca_pem == serving.ca_pem
    assert isinstance(serving.context, ssl.SSLContext)


def test_from_files_the_ca_defaults_to_the_certificate_and_a_change_is_read_again(tmp_path: Path):
    cert, key, pem = write_pair(tmp_path)
    target, serving = push_setup(parse("--progress-endpoint", "https://127.0.0.1:8443", "--progress-tls-cert", str(cert),
                                       "--progress-tls-key", str(key)))  # fmt: skip
    assert target.ca_pem == pem
    assert tls.reload(serving) is False  # nothing changed
    (tmp_path / "old").mkdir()
    cert2, key2, pem2 = write_pair(tmp_path / "old")
    os.replace(cert2, cert)
    os.replace(key2, key)
    assert tls.reload(serving) is True
    assert serving.ca_pem == pem2
    (tmp_path / "tls.key").write_text("half written")  # a broken file: the old certificate stays
    assert tls.reload(serving) is False
    assert serving.ca_pem == pem2


def test_a_kept_secret_starts_with_nothing_loaded_and_takes_the_pods_namespace(monkeypatch):
    """--progress-tls-secret: the Secret's certificate and CA come later (cert_secret.py), before
    anything listens; its namespace defaults to the pod's."""
    from airflow_t9k.controller.push_setup import secret_ref

    monkeypatch.setenv("POD_NAMESPACE", "airflow-t9k-system")
    target, serving = push_setup(parse("--progress-endpoint", "https://ctl.airflow-t9k-system.svc:8443",
                                       "--progress-tls-secret", "ctl-progress-certs"))  # fmt: skip
    assert (target.ca_pem, serving.ca_pem, serving.loaded, serving.files) == ("", "", b"", None)
    assert secret_ref("ctl-progress-certs") == ("airflow-t9k-system", "ctl-progress-certs")
    assert secret_ref("other/ctl-progress-certs") == ("other", "ctl-progress-certs")
