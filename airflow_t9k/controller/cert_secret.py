"""The Secret that holds the progress endpoint's CA and certificate, kept by every controller
replica (docs/progress.md, "TLS"; what to write: ``certs.plan_certs``).

Every replica, leader or not, reads the Secret, writes what ``plan_certs`` says is missing or
due, and serves what the Secret then holds. Each write carries the resourceVersion it read
(create: the name), so when two replicas race only one write lands; the other gets 409, reads
again, finds a CA and a certificate it accepts, and serves those. Hence one CA, whoever started
first. A watch on the one Secret (by name: RBAC names it) brings another replica's write, or an
edit by hand, within moments; a read every ``every`` seconds finds a renewal that came due.

Its client is not the reconciler's (whose writes only the leader may send): a standby keeps its
certificate current too.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.certs import CA_DAYS, CERT_DAYS, KEYS, plan_certs
from airflow_t9k.controller.tls import ServingTLS, load_pems
from airflow_t9k.k8s.errors import AlreadyExists, ApiError, Conflict, Gone, NotFound, is_permanent

if TYPE_CHECKING:
    from airflow_t9k.k8s.client import Kube

log = logging.getLogger(__name__)

Obj = dict[str, Any]
EVERY = 300  # seconds between two reads when nothing changes (a watch lasts that long)
RACES = 5  # writes lost in a row before a round gives up (another writer keeps changing it)


class CertsUnavailable(Exception):
    """The Secret cannot be read or written: the message says why and what right is missing."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def decode(secret: Obj | None) -> dict[str, bytes]:
    out = {}
    for k, v in ((secret or {}).get("data") or {}).items():
        try:
            out[k] = base64.b64decode(v, validate=True)
        except (binascii.Error, TypeError, ValueError):
            out[k] = b""  # unreadable: plan_certs replaces it
    return out


class CertSecret:
    def __init__(self, kube: Kube, namespace: str, name: str, names: list[str], tls: ServingTLS, *,
                 ca_days: int = CA_DAYS, cert_days: int = CERT_DAYS, every: int = EVERY,
                 on_bundle: Callable[[str], None] | None = None,
                 clock: Callable[[], datetime.datetime] = _now) -> None:  # fmt: skip
        self.kube, self.namespace, self.name, self.names = kube, namespace, name, names
        self.tls = tls
        self.ca_days, self.cert_days, self.every = ca_days, cert_days, every
        self.on_bundle = on_bundle  # told the CA bundle whenever it changes (pods created next get it)
        self.clock = clock
        self.collection = f"/api/v1/namespaces/{namespace}/secrets"
        self.path = f"{self.collection}/{name}"
        self.writes = 0  # writes that landed
        self.races = 0  # writes another replica's write beat (this one read again)

    @property
    def where(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    # -- one round ------------------------------------------------------------------------------
    async def sync(self) -> str:
        """Read the Secret, write what is missing or due, serve the result. Returns the
        resourceVersion served (where a watch starts)."""
        for _ in range(RACES):
            secret = await self.read()
            data = decode(secret)
            new = plan_certs(data, self.names, self.clock(), ca_days=self.ca_days, cert_days=self.cert_days)
            if new is None:
                self.serve(data)
                return str((secret or {}).get("metadata", {}).get("resourceVersion") or "")
            try:
                written = await self.write(secret, {**data, **new})
            except (Conflict, AlreadyExists, NotFound):  # NotFound: deleted between the read and the write
                self.races += 1
                log.info("progress TLS: another replica wrote %s first; reading it again", self.where)
                continue
            self.writes += 1
            log.info("progress TLS: wrote %s (%s)", self.where, what_changed(data, new))
            self.serve(new)
            return str(written.get("metadata", {}).get("resourceVersion") or "")
        raise CertsUnavailable(f"{self.where} changed under every one of {RACES} writes in a row")

    async def read(self) -> Obj | None:
        try:
            return await self.kube.get(self.path)
        except NotFound:
            return None

    async def write(self, secret: Obj | None, data: dict[str, bytes]) -> Obj:
        encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
        if secret is None:
            # The chart renders the Secret (empty); this is for one deleted since, or a deployment
            # without it. Create cannot be limited to a name by RBAC: docs/progress.md, "TLS".
            labels = {"app.kubernetes.io/part-of": "airflow-t9k", "app.kubernetes.io/component": "controller"}
            meta = {"name": self.name, "namespace": self.namespace, "labels": labels}
            body = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": encoded}
            return await self.kube.create(self.collection, body=body)
        # The object as read, resourceVersion included: a write after another's is a 409.
        meta = {k: v for k, v in secret["metadata"].items() if k != "managedFields"}
        return await self.kube.replace(self.path, body={**secret, "metadata": meta, "data": encoded})

    def serve(self, data: dict[str, bytes]) -> None:
        """Load the certificate into the one SSLContext the listener holds (new connections get
        it; open ones keep theirs) and hand on a changed CA bundle."""
        bundle = data["ca.crt"].decode()
        before = self.tls.ca_pem
        if load_pems(self.tls, data["tls.crt"], data["tls.key"], bundle):
            log.info("progress TLS: serving the certificate from %s", self.where)
        if bundle != before and self.on_bundle is not None:
            self.on_bundle(bundle)

    # -- for good -----------------------------------------------------------------------------
    async def start(self, timeout: float = 60.0) -> None:
        """The first round, before the listener opens and before any pod gets the CA. A refusal
        (RBAC, an admission policy) fails at once; an API server that does not answer is waited
        for up to ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + timeout, 0.5
        while True:
            try:
                await self.sync()
                return
            except ApiError as exc:
                if is_permanent(exc) or loop.time() + delay > deadline:
                    raise CertsUnavailable(self._why(exc)) from None
            except OSError as exc:
                if loop.time() + delay > deadline:
                    raise CertsUnavailable(self._why(exc)) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def run(self) -> None:
        """Keep the Secret current and serve it, until cancelled: a round, then the watch until
        the Secret changes or ``every`` seconds pass. A failed round is logged and tried again;
        meanwhile the certificate loaded keeps being served."""
        delay = 1.0
        while True:
            try:
                version = await self.sync()
                await self.changed(version)
                delay = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - an outage or a refusal: serve what is loaded, try again
                log.warning("progress TLS: %s", self._why(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 60.0)

    async def changed(self, version: str) -> None:
        """Return at the Secret's next change after ``version`` (or when the watch ends)."""
        query = {"fieldSelector": f"metadata.name={self.name}", "resourceVersion": version or None}
        try:
            async for event in self.kube.watch(self.collection, query=query, timeout_seconds=self.every):
                if event.get("type") != "BOOKMARK":
                    return
        except Gone:  # the version is too old to watch from: a read will do
            return

    def _why(self, exc: BaseException) -> str:
        if is_permanent(exc):
            return (f"may not read or write {self.where} ({exc}): the controller needs get, watch and update on it "
                    "and create on Secrets in its namespace (the chart's Role <fullname>-controller-progress-tls), "
                    "and the admission policy <release>-controller-writes must allow them")  # fmt: skip
        return f"cannot keep {self.where} current ({type(exc).__name__}: {exc}); serving the certificate loaded"


def what_changed(old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """For the log: which keys a write changed (never their contents)."""
    return "new " + ", ".join(k for k in KEYS if old.get(k) != new.get(k))
