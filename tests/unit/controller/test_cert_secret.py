"""controller/cert_secret.py's rounds against an in-memory store with the API server's write
preconditions (a create of a taken name and a write from an old resourceVersion are 409): two
replicas racing leave one CA, the loser reads again and serves the winner's; a changed bundle is
handed on; the listener's one SSLContext takes the new certificate. The same against the real API
server, with a real TLS client: tests/integration/test_progress_certs.py."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
from typing import Any

import pytest

from airflow_t9k.controller import tls as tls_mod
from airflow_t9k.controller.cert_secret import CertSecret, CertsUnavailable, decode
from airflow_t9k.controller.certs import plan_certs
from airflow_t9k.k8s.errors import AlreadyExists, Conflict, Forbidden, NotFound

NS, NAME = "airflow-t9k-system", "airflow-t9k-controller-progress-certs"
NAMES = [f"airflow-t9k-controller-progress.{NS}.svc"]


class Store:
    """One Secret, as the API server keeps it: every read yields to the loop first (so two
    replicas' rounds interleave), every write checks its precondition."""

    def __init__(self, secret: dict[str, Any] | None = None) -> None:
        self.secret = secret
        self.version = 1
        self.denied = False
        if secret is not None:
            secret["metadata"]["resourceVersion"] = "1"

    async def get(self, path: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        if self.secret is None:
            raise NotFound(404, "NotFound", path)
        return copy.deepcopy(self.secret)

    async def create(self, path: str, *, body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        if self.denied:
            raise Forbidden(403, "Forbidden", "secrets is forbidden")
        if self.secret is not None:
            raise AlreadyExists(409, "AlreadyExists", "taken")
        return self._keep(body)

    async def replace(self, path: str, *, body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        if self.secret is None:
            raise NotFound(404, "NotFound", path)
        if body["metadata"].get("resourceVersion") != self.secret["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        return self._keep(body)

    def _keep(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.secret = copy.deepcopy(body)
        self.secret["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.secret)


def keeper(store: Store, **kw: Any) -> CertSecret:
    return CertSecret(store, NS, NAME, NAMES, tls_mod.empty(), **kw)  # type: ignore[arg-type]  # the store has Kube's verbs used here


def empty_secret() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": NAME, "namespace": NS}, "type": "Opaque"}


@pytest.mark.asyncio
@pytest.mark.parametrize("rendered", [True, False], ids=["the chart's empty Secret", "no Secret"])
async def test_two_replicas_racing_leave_one_ca_and_both_serve_it(rendered):
    store = Store(empty_secret() if rendered else None)
    a, b = keeper(store), keeper(store)
    await asyncio.gather(a.sync(), b.sync())
    assert (a.writes, b.writes) in ((1, 0), (0, 1))  # one write landed
    assert a.races + b.races == 1  # the other lost, read again, and kept what it found
    data = decode(store.secret)
    assert plan_certs(data, NAMES, datetime.datetime.now(datetime.timezone.utc)) is None
    assert a.tls.ca_pem == b.tls.ca_pem == data["ca.crt"].decode()
    assert a.tls.loaded == b.tls.loaded == data["tls.crt"] + data["tls.key"]
    if not rendered:
        assert store.secret["metadata"]["labels"]["app.kubernetes.io/part-of"] == "airflow-t9k"


@pytest.mark.asyncio
async def test_an_edit_by_hand_is_renewed_and_served_and_a_new_bundle_handed_on():
    store = Store(empty_secret())
    bundles: list[str] = []
    k = keeper(store, on_bundle=bundles.append)
    await k.sync()
    assert bundles == [k.tls.ca_pem]
    first = decode(store.secret)
    store.secret["data"]["tls.crt"] = base64.b64encode(b"garbage").decode()  # someone edits it
    store.secret["metadata"]["resourceVersion"] = "99"
    await k.sync()
    again = decode(store.secret)
    assert again["ca.crt"] == first["ca.crt"]  # the same CA: pods keep trusting
    assert again["tls.crt"] not in (first["tls.crt"], b"garbage")
    assert k.tls.loaded == again["tls.crt"] + again["tls.key"]
    assert bundles == [first["ca.crt"].decode()]  # the bundle did not change: nothing handed on
    assert k.writes == 2


@pytest.mark.asyncio
async def test_a_refusal_fails_the_start_at_once_naming_the_rights():
    store = Store(None)
    store.denied = True
    with pytest.raises(CertsUnavailable, match="get, watch and update on it and create on Secrets"):
        await asyncio.wait_for(keeper(store).start(timeout=30), 5)
