"""The progress endpoint's serving certificate (docs/progress.md, "TLS").

Three ways, chosen by flags:

- **A Secret the controllers keep** (``--progress-tls-secret``, the Helm chart's default): every
  replica makes the CA and the certificate when the Secret lacks them, renews them, and serves
  what it holds (``certs.py``, ``cert_secret.py``, ``load_pems`` here). Restarts, upgrades and
  re-renders keep the CA.
- **Files** (``--progress-tls-cert``, ``--progress-tls-key``, ``--progress-tls-ca``): what a
  deployment mounts from a Secret someone else keeps (cert-manager's, the user's). They are read
  again when they change (checked every minute), so a renewed certificate is served without a
  restart, and pods created after that get the new CA. The CA defaults to the certificate itself
  (a self-signed one).
- **Made at start** (neither): a CA and a serving certificate for the endpoint's host, kept in
  memory only, for one controller run by hand (the local cluster). A restarted controller has a
  new CA, which replicas started before it do not trust: their reports fail until they end.

Whichever way, one ``SSLContext`` serves from start to end: a new certificate is loaded into it,
new connections get it, the listener and the open connections stay.
"""

from __future__ import annotations

import asyncio
import datetime
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
    loaded: bytes = b""  # the certificate and key last given to load_pems


def empty() -> ServingTLS:
    """A context with no certificate yet, for ``load_pems`` to fill (before the listener starts)."""
    return ServingTLS(_context(), "")


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
    """A CA and a certificate it signs for ``hosts`` (names or addresses), in memory."""
    from cryptography.hazmat.primitives import serialization  # here: about 7 MB a controller without TLS never loads

    from airflow_t9k.controller.certs import issue, new_ca

    now = datetime.datetime.now(datetime.timezone.utc)
    ca = new_ca(now, days)
    cert_pem, key_pem = issue(ca, list(dict.fromkeys([*hosts, "localhost", "127.0.0.1"])), now, days)
    ctx = _context()
    _load_chain(ctx, cert_pem, key_pem)
    return ServingTLS(ctx, ca.cert.public_bytes(serialization.Encoding.PEM).decode())


def load_pems(tls: ServingTLS, cert_pem: bytes, key_pem: bytes, ca_pem: str) -> bool:
    """Serve this certificate to new connections from now on, and give pods ``ca_pem``. False
    when it is what is served already. Give only a pair known to match (``certs.serves``): a key
    that does not fit the certificate raises ssl.SSLError and may leave the context without one."""
    if cert_pem + key_pem == tls.loaded:
        tls.ca_pem = ca_pem
        return False
    if "-----BEGIN CERTIFICATE-----" not in ca_pem:
        raise ValueError("no PEM certificate in the CA bundle")
    _load_chain(tls.context, cert_pem, key_pem)
    tls.loaded, tls.ca_pem = cert_pem + key_pem, ca_pem
    return True


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
