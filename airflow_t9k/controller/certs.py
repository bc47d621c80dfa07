"""The progress endpoint's CA and serving certificate, kept by the controllers themselves in one
Secret (docs/progress.md, "TLS"), as Kueue's and Kubeflow Trainer's controllers keep their
webhooks' (open-policy-agent/cert-controller).

Pure: ``plan_certs`` reads what the Secret holds and says what it should hold, or None when it is
right as it is; ``cert_secret.py`` reads and writes the Secret. The Secret's keys:

- ``ca.crt``: the CAs replicas trust (PEM, oldest first): what every pod created from now on gets;
- ``ca.key``: their keys, in the same order (only the controllers read them);
- ``tls.crt``, ``tls.key``: the serving certificate and its key.

The rules (``RENEW_AT`` of a life is when its successor is made):

- no usable CA (none, unreadable, expired, its key missing): a new one, and a certificate from it;
- the newest CA past 2/3 of its life: a new CA joins the bundle, the old one stays. The serving
  certificate stays the old CA's while that CA can still cover a whole certificate's life, so a
  pod created before the new CA, which trusts only the old one, keeps pushing for years; pods
  created after it trust both. Past that point certificates come from the new CA;
- a CA past its end leaves the bundle;
- the serving certificate is reissued (a new key) when it is past 2/3 of its life, does not name
  every host, is not the chosen CA's, or does not match its key.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
CERT_DAYS = 90
RENEW_AT = 2 / 3  # of a certificate's or a CA's life: when the next one is made
SKEW = datetime.timedelta(minutes=5)  # a certificate starts this long before it is made: clocks differ
KEYS = ("ca.crt", "ca.key", "tls.crt", "tls.key")
_PEM_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----.+?-----END [A-Z ]*PRIVATE KEY-----\s*", re.DOTALL)
_PEM = serialization.Encoding.PEM


@dataclass(frozen=True)
class CA:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def plan_certs(secret_data: Mapping[str, bytes] | None, names: Sequence[str], now: datetime.datetime, *,
               ca_days: int = CA_DAYS, cert_days: int = CERT_DAYS) -> dict[str, bytes] | None:  # fmt: skip
    """The four keys the Secret should hold for a server named ``names`` at ``now``, or None when
    what it holds is right. ``secret_data``: the Secret's data, decoded (None: no Secret)."""
    data = secret_data or {}
    cas = usable_cas(data.get("ca.crt"), data.get("ca.key"), now)
    if not cas or _due(cas[-1].cert, now):
        cas.append(new_ca(now, ca_days))
    signer = choose_signer(cas, now, cert_days)
    cert_pem, key_pem = data.get("tls.crt") or b"", data.get("tls.key") or b""
    if not serves(cert_pem, key_pem, signer, names, now):
        cert_pem, key_pem = issue(signer, names, now, cert_days)
    out = {
        "ca.crt": b"".join(ca.cert.public_bytes(_PEM) for ca in cas),
        "ca.key": b"".join(key_bytes(ca.key) for ca in cas),
        "tls.crt": cert_pem,
        "tls.key": key_pem,
    }
    return None if all(data.get(k) == v for k, v in out.items()) else out


def usable_cas(bundle: bytes | None, keys: bytes | None, now: datetime.datetime) -> list[CA]:
    """The CAs of the bundle that are valid now and whose key is among ``keys``, oldest first.
    Anything unreadable counts as nothing: a corrupt Secret is replaced, never a reason to stop."""
    try:
        certs = x509.load_pem_x509_certificates(bundle or b"")
    except ValueError:
        return []
    held: dict[bytes, ec.EllipticCurvePrivateKey] = {}
    for block in _PEM_KEY.findall(keys or b""):
        try:
            loaded = serialization.load_pem_private_key(block, password=None)
        except (ValueError, TypeError):
            continue
        if isinstance(loaded, ec.EllipticCurvePrivateKey):
            held[_public(loaded.public_key())] = loaded
    out = []
    for cert in certs:
        key = held.get(_public(cert.public_key()))
        if key is not None and _is_ca(cert) and _start(cert) <= now < _end(cert):
            out.append(CA(cert, key))
    return sorted(out, key=lambda ca: _start(ca.cert))


def choose_signer(cas: Sequence[CA], now: datetime.datetime, cert_days: int) -> CA:
    """The oldest CA that still covers a whole certificate's life: the one every pod created
    since it was made trusts. The newest when none does."""
    life = datetime.timedelta(days=cert_days)
    return next((ca for ca in cas if _end(ca.cert) - now >= life), cas[-1])


def serves(cert_pem: bytes, key_pem: bytes, signer: CA, names: Sequence[str], now: datetime.datetime) -> bool:
    """Whether this certificate and key may go on serving: signed by ``signer``, naming every
    host, matching the key, and before 2/3 of its life."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        cert.verify_directly_issued_by(signer.cert)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    if _public(key.public_key()) != _public(cert.public_key()):  # any key type: compared by its bytes
        return False
    if not set(_general_names(names)) <= set(sans):  # more names than ours: another replica's flags, harmless
        return False
    return _start(cert) <= now and not _due(cert, now)


def new_ca(now: datetime.datetime, days: int = CA_DAYS) -> CA:
    """A CA of ECDSA P-256 (a cheap handshake). Its name carries when it was made: two CAs in one
    bundle never share a subject."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"airflow-t9k progress CA {now:%Y%m%dT%H%M%SZ}")])
    usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                          decipher_only=False)  # fmt: skip
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return CA(cert, key)


def issue(ca: CA, names: Sequence[str], now: datetime.datetime, days: int = CERT_DAYS) -> tuple[bytes, bytes]:
    """A serving certificate for ``names`` (host names or addresses) signed by ``ca``, and its
    new key, as PEM. It ends with its CA at the latest."""
    key = ec.generate_private_key(ec.SECP256R1())
    end = min(now + datetime.timedelta(days=days), _end(ca.cert))
    first = names[0] if names else "localhost"
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, first[:64])]))
        .issuer_name(ca.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - SKEW).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(_general_names(names)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )  # fmt: skip
    return cert.public_bytes(_PEM), key_bytes(key)


def key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _general_names(names: Sequence[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for n in dict.fromkeys(names):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            out.append(x509.DNSName(n))
    return out


def _public(key: object) -> bytes:
    return key.public_bytes(_PEM, serialization.PublicFormat.SubjectPublicKeyInfo)  # type: ignore[attr-defined]  # every public key type has it


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _due(cert: x509.Certificate, now: datetime.datetime) -> bool:
    """Past ``RENEW_AT`` of its life: time for the next one."""
    start, end = _start(cert), _end(cert)
    return now >= start + (end - start) * RENEW_AT


# cryptography < 42 has only the naive datetimes (UTC); the package allows >= 41.
def _start(cert: x509.Certificate) -> datetime.datetime:
    when = getattr(cert, "not_valid_before_utc", None)
    return when if when is not None else cert.not_valid_before.replace(tzinfo=datetime.timezone.utc)


def _end(cert: x509.Certificate) -> datetime.datetime:
    when = getattr(cert, "not_valid_after_utc", None)
    return when if when is not None else cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)
