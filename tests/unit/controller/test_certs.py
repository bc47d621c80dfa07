"""controller/certs.py: what the controllers write into the progress endpoint's Secret, as a table
of what it holds (docs/progress.md, "TLS"). Each case ends steady: planning again from what was
planned changes nothing, so replicas that all plan agree and stop writing."""

from __future__ import annotations

import datetime
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509

from airflow_t9k.controller import certs
from airflow_t9k.controller.certs import CA, issue, key_bytes, new_ca, plan_certs
from tests.support.tls import handshake

NOW = datetime.datetime(2027, 3, 1, 12, 0, tzinfo=datetime.timezone.utc)
DAY = datetime.timedelta(days=1)
YEAR = 365 * DAY
NAMES = ["airflow-t9k-controller-progress.ml.svc", "airflow-t9k-controller-progress.ml.svc.cluster.local"]
Data = dict[str, bytes]


def data_of(cas: list[CA], cert: tuple[bytes, bytes]) -> Data:
    """A Secret's data as the controller writes it."""
    pem = certs._PEM
    return {"ca.crt": b"".join(c.cert.public_bytes(pem) for c in cas), "ca.key": b"".join(key_bytes(c.key) for c in cas),
            "tls.crt": cert[0], "tls.key": cert[1]}  # fmt: skip


def made(ca_age: datetime.timedelta = 10 * DAY, cert_age: datetime.timedelta = 10 * DAY, names: list[str] = NAMES,
         at: datetime.datetime = NOW) -> Data:  # fmt: skip
    """A CA made ``ca_age`` before ``at`` (10 years' life) and a certificate it signed ``cert_age``
    before (90 days)."""
    ca = new_ca(at - ca_age)
    return data_of([ca], issue(ca, names, at - cert_age))


def cas_in(data: Data) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(data["ca.crt"])


def cert_in(data: Data) -> x509.Certificate:
    return x509.load_pem_x509_certificate(data["tls.crt"])


def sans(cert: x509.Certificate) -> list[str]:
    return [str(n.value) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value]


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # noqa: BLE001 - any failure is "no"
        return False
    return True


def life(cert: x509.Certificate) -> datetime.timedelta:
    return cert.not_valid_after_utc - cert.not_valid_before_utc


def garbage(key: str) -> Callable[[Data], Data]:
    return lambda d: {**d, key: b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n"}


# (case, what the Secret holds, what is kept of it: "all" (None planned), "ca" (same CA, a new
# certificate and key), "nothing" (a new CA and certificate))
CASES: list[tuple[str, Callable[[], Data | None], str]] = [
    ("absent", lambda: None, "nothing"),
    ("empty, as the chart renders it", lambda: {}, "nothing"),
    ("valid", lambda: made(), "all"),
    ("valid, naming more hosts than asked (another replica's flags)", lambda: made(names=[*NAMES, "extra.svc"]), "all"),
    ("certificate just before 2/3 of its life", lambda: made(cert_age=59 * DAY), "all"),
    ("certificate past 2/3 of its life", lambda: made(cert_age=61 * DAY), "ca"),
    ("certificate expired", lambda: made(cert_age=100 * DAY), "ca"),
    ("certificate for other names", lambda: made(names=["other.ml.svc"]), "ca"),
    ("certificate naming one host of two", lambda: made(names=NAMES[:1]), "ca"),
    ("certificate corrupt", lambda: garbage("tls.crt")(made()), "ca"),
    ("certificate's key missing", lambda: {k: v for k, v in made().items() if k != "tls.key"}, "ca"),
    ("certificate's key another one", lambda: {**made(), "tls.key": made()["tls.key"]}, "ca"),
    ("certificate of another CA", lambda: {**made(), "tls.crt": made()["tls.crt"]}, "ca"),
    ("CA corrupt", lambda: garbage("ca.crt")(made()), "nothing"),
    ("CA's key missing", lambda: {k: v for k, v in made().items() if k != "ca.key"}, "nothing"),
    ("CA's key another one", lambda: {**made(), "ca.key": made()["ca.key"]}, "nothing"),
    ("CA expired", lambda: made(ca_age=11 * 365 * DAY, cert_age=400 * DAY), "nothing"),
]


@pytest.mark.parametrize(("case", "holds", "kept"), CASES, ids=[c[0] for c in CASES])
def test_what_the_secret_holds_decides_what_is_written(case, holds, kept):
    before = holds()
    after = plan_certs(before, NAMES, NOW)
    if kept == "all":
        assert after is None
        return
    assert after is not None
    (ca,) = cas_in(after)
    cert = cert_in(after)
    assert signed_by(cert, ca)
    assert sans(cert) == NAMES
    assert cert.not_valid_before_utc <= NOW < cert.not_valid_after_utc
    assert life(cert) == 90 * DAY + certs.SKEW
    assert certs.serves(
        after["tls.crt"], after["tls.key"], certs.usable_cas(after["ca.crt"], after["ca.key"], NOW)[0], NAMES, NOW
    )
    if kept == "ca":  # renewed under the same CA: every pod keeps trusting it
        assert before is not None
        assert (after["ca.crt"], after["ca.key"]) == (before["ca.crt"], before["ca.key"])
        assert after["tls.key"] != before.get("tls.key")  # a new key, not only a new certificate
    else:
        assert life(ca) == 3650 * DAY + certs.SKEW
        assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        if before and before.get("ca.crt"):
            assert after["ca.crt"] != before["ca.crt"]
    assert b"PRIVATE KEY" in after["ca.key"]
    assert b"PRIVATE KEY" not in after["ca.crt"]
    assert plan_certs(after, NAMES, NOW) is None  # steady


def test_a_ca_near_its_end_gets_a_successor_while_pods_with_the_old_bundle_keep_trusting():
    """At 2/3 of the CA's life a new CA joins the bundle; the certificate stays the old CA's for as
    long as that CA can cover a whole certificate, so a pod created before (which trusts only
    the old CA) still verifies it. Pods created after get both. Once the old CA cannot cover a
    certificate's life any more, certificates come from the new CA; the old leaves the bundle
    when it ends."""
    old = made(ca_age=7 * YEAR, cert_age=10 * DAY)  # 3 years left of 10
    (old_ca,) = cas_in(old)
    step1 = plan_certs(old, NAMES, NOW)
    assert step1 is not None
    first, second = cas_in(step1)
    assert first.subject == old_ca.subject
    assert second.not_valid_before_utc > first.not_valid_before_utc
    assert (step1["tls.crt"], step1["tls.key"]) == (old["tls.crt"], old["tls.key"])  # still the old CA's
    assert signed_by(cert_in(step1), old_ca)
    assert first.subject != second.subject  # never two CAs of one name in a bundle
    assert plan_certs(step1, NAMES, NOW) is None  # steady: one successor, not one per round

    # Renewals under the old CA while it covers a certificate's life.
    later = NOW + 2 * YEAR
    step2 = plan_certs(step1, NAMES, later)
    assert step2 is not None
    assert step2["ca.crt"] == step1["ca.crt"]
    assert signed_by(cert_in(step2), old_ca)

    # 60 days left of the old CA: the certificate comes from the new one; both stay trusted.
    switch = old_ca.not_valid_after_utc - 60 * DAY
    step3 = plan_certs(step2, NAMES, switch)
    assert step3 is not None
    assert step3["ca.crt"] == step1["ca.crt"]
    assert signed_by(cert_in(step3), second)
    assert plan_certs(step3, NAMES, switch) is None

    # The old CA ended: it leaves the bundle, its key with it.
    gone = old_ca.not_valid_after_utc + DAY
    step4 = plan_certs(step3, NAMES, gone)
    assert step4 is not None
    assert [c.subject for c in cas_in(step4)] == [second.subject]
    assert signed_by(cert_in(step4), second)
    assert len(certs.usable_cas(step4["ca.crt"], step4["ca.key"], gone)) == 1


def test_a_certificate_never_outlives_its_ca():
    ca = new_ca(NOW - 3650 * DAY + 30 * DAY)  # 30 days left
    cert_pem, _ = issue(ca, NAMES, NOW)
    assert x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc == ca.cert.not_valid_after_utc


def test_addresses_are_ip_names_and_days_are_the_callers():
    after = plan_certs(None, ["10.88.0.1", "ctl.ml.svc"], NOW, ca_days=30, cert_days=3)
    assert after is not None
    cert = cert_in(after)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["10.88.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["ctl.ml.svc"]
    assert life(cert) == 3 * DAY + certs.SKEW
    assert life(cas_in(after)[0]) == 30 * DAY + certs.SKEW


def test_the_flags_defaults_are_the_modules():
    from airflow_t9k.controller import push_setup

    assert (push_setup.CERT_DAYS, push_setup.CA_DAYS) == (certs.CERT_DAYS, certs.CA_DAYS)


def _handshake(server: Data, trusted: bytes, host: str, tmp: Path) -> None:
    handshake(server["tls.crt"], server["tls.key"], trusted, host, tmp)


def test_real_handshakes_across_a_ca_rotation(tmp_path):
    """What the table says, with Python's ssl as the helper in a pod uses it (and the real clock,
    which the handshake checks): while the certificate is the old CA's, a pod created before the
    new CA (the old bundle) and one created after (both) connect; once the old CA cannot cover a
    certificate any more, the certificate is the new CA's: pods created after the new CA connect,
    those that trust only the old one no longer do."""
    now = datetime.datetime.now(datetime.timezone.utc)
    old = made(ca_age=7 * YEAR, at=now)
    step1 = plan_certs(old, NAMES, now)
    assert step1 is not None
    for bundle in (old["ca.crt"], step1["ca.crt"]):
        _handshake(step1, bundle, NAMES[0], tmp_path)

    ending, successor = new_ca(now - 3590 * DAY), new_ca(now - YEAR)  # 60 days left; made a year ago
    both = data_of([ending, successor], issue(ending, NAMES, now - 10 * DAY))
    switched = plan_certs(both, NAMES, now)
    assert switched is not None
    assert signed_by(cert_in(switched), successor.cert)
    _handshake(switched, switched["ca.crt"], NAMES[0], tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(switched, data_of([ending], (b"", b""))["ca.crt"], NAMES[0], tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError):  # another name than the certificate's
        _handshake(step1, step1["ca.crt"], "airflow-t9k-controller-progress.other.svc", tmp_path)
