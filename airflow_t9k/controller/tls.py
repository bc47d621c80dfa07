"""The progress endpoint's serving certificate (docs/progress.md, "TLS").

Two ways, chosen by flags:

- **Files** (``--progress-tls-cert``, ``--progress-tls-key``, ``--progress-tls-ca``): what a
  deployment mounts from a Secret (the Helm chart's, cert-manager's). They are read again when
  they change (checked every minute), so a renewed certificate is served without a restart, and
  pods created after that get the new CA. The CA defaults to the certificate itself (a
  self-signed one).
- **Made at start** (no files): a CA and a serving certificate for the endpoint's host, kept in
  memory only, for one controller run by hand (the local cluster). A restarted controller has a
  new CA, which replicas started before it do not trust: their reports fail until they end.
  That is why a deployment gives files.

Either way the controller reads nothing from the cluster: it holds no right on Secrets but
``create`` (docs/design.md, "Tenancy"), and needs none for this.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CHECK_EVERY = 60.0  # seconds between looks at the certificate files


@dataclass
class ServingTLS:
    context: ssl.SSLContext
    ca_pem: str
    files: tuple[str, str, str] | None = None  # (cert, key, ca) when read from files
    stamp: tuple[tuple[int, int, int], ...] = ()  # the files' (inode, mtime, size) when last read


def _context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _stamp(paths: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
    """What tells a changed file: a Secret volume swaps in new files (a new inode), an editor writes in place."""
    out = []
    for p in paths:
        st = os.stat(p)
        out.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


def from_files(cert: str, key: str, ca: str | None = None) -> ServingTLS:
    """The certificate and key as given; the CA replicas get is ``ca`` (default: ``cert``).
    Raises OSError/ssl.SSLError/ValueError naming what is wrong."""
    ca = ca or cert
    ctx = _context()
    ctx.load_cert_chain(cert, key)
    ca_pem = Path(ca).read_text()
    if "-----BEGIN CERTIFICATE-----" not in ca_pem:
        raise ValueError(f"{ca} holds no PEM certificate")
    files = (cert, key, ca)
    return ServingTLS(ctx, ca_pem, files, _stamp(files))


def reload(tls: ServingTLS) -> bool:
    """Read the files again when they changed: the same context serves the new certificate to
    new connections. True when something was loaded; a half-written file is tried again later."""
    if tls.files is None:
        return False
    cert, key, ca = tls.files
    try:
        stamp = _stamp(tls.files)
        if stamp == tls.stamp:
            return False
        tls.context.load_cert_chain(cert, key)
        ca_pem = Path(ca).read_text()
    except (OSError, ssl.SSLError, ValueError) as exc:
        log.warning("progress endpoint: could not read the certificate files again (%s); serving the old ones", exc)
        return False
    if "-----BEGIN CERTIFICATE-----" in ca_pem:
        tls.ca_pem = ca_pem
    tls.stamp = stamp
    log.info("progress endpoint: certificate files changed; serving the new certificate")
    return True


async def watch(tls: ServingTLS, every: float = CHECK_EVERY) -> None:
    while True:
        await asyncio.sleep(every)
        reload(tls)


def self_signed(hosts: list[str], days: int = 365) -> ServingTLS:
    """A CA and a certificate it signs for ``hosts`` (names or addresses), in memory (ECDSA P-256:
    a cheap handshake)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "airflow-t9k progress CA")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    sans: list[x509.GeneralName] = []
    for h in dict.fromkeys([*hosts, "localhost", "127.0.0.1"]):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "localhost")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = serialization.Encoding.PEM
    ctx = _context()
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    _load_chain(ctx, cert.public_bytes(pem), key_pem)
    return ServingTLS(ctx, ca_cert.public_bytes(pem).decode())


def _load_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """``load_cert_chain`` reads files only. In memory where Linux offers it (``memfd``): the
    chart's pods have a read-only root filesystem and no writable /tmp; elsewhere a private
    directory, gone once loaded."""
    if hasattr(os, "memfd_create"):
        fds = [os.memfd_create(name) for name in ("tls.crt", "tls.key")]
        try:
            for fd, data in zip(fds, (cert_pem, key_pem), strict=True):
                os.write(fd, data)
            ctx.load_cert_chain(f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}")
            return
        except OSError:
            pass  # no /proc: the directory below
        finally:
            for fd in fds:
                os.close(fd)
    with tempfile.TemporaryDirectory(prefix="t9k-progress-tls-") as tmp:
        cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert_path.write_bytes(cert_pem)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key_pem)
        ctx.load_cert_chain(str(cert_path), str(key_path))
