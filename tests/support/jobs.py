"""Job CRUD for tests, through the official client's custom-objects API."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from airflow_t9k.api.resources import resource_for
from airflow_t9k.controller.crds import all_crds, template_crds
from tests.support.cluster import wait_until

Obj = dict[str, Any]


def install_crds(api_client: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    for crd in [*all_crds(), *template_crds()]:
        name = crd["metadata"]["name"]
        try:
            ext.create_custom_resource_definition(crd)
        except ApiException as exc:
            if exc.status != 409:
                raise
            current = ext.read_custom_resource_definition(name)
            body = copy.deepcopy(crd)
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            ext.replace_custom_resource_definition(name, body)
    for crd in [*all_crds(), *template_crds()]:
        wait_until(lambda c=crd: _established(ext, c["metadata"]["name"]), timeout=30, what="CRD established")


def _established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    conds = ext.read_custom_resource_definition(name).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conds)


def refused(create: Callable[[Obj], Obj], body: Obj) -> str:
    """Create what the API server must refuse at admission (422); the refusal's text."""
    try:
        create(body)
    except ApiException as exc:
        status, text = exc.status, str(exc.body)
    else:
        raise AssertionError(f"the API server accepted {body['kind']} {body['metadata'].get('name')}")
    assert status == 422, text
    return text


class Jobs:
    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.ns = namespace

    def _r(self, kind: str):
        r = resource_for(kind)
        return r.group, r.version, self.ns, r.plural

    def create(self, job: Obj) -> Obj:
        job = copy.deepcopy(job)
        job["metadata"].pop("namespace", None)
        return self.api.create_namespaced_custom_object(*self._r(job["kind"]), job)

    def rejected(self, job: Obj) -> str:
        """Create a job the API server must refuse at admission (422); the refusal's text."""
        return refused(self.create, job)

    def get(self, kind: str, name: str) -> Obj:
        return self.api.get_namespaced_custom_object(*self._r(kind), name)

    def patch(self, kind: str, name: str, body: Obj) -> Obj:
        return self.api.patch_namespaced_custom_object(*self._r(kind), name, body)

    def delete(self, kind: str, name: str) -> None:
        self.api.delete_namespaced_custom_object(*self._r(kind), name)

    def phase(self, kind: str, name: str) -> str | None:
        return (self.get(kind, name).get("status") or {}).get("phase")

    def wait_phase(self, kind: str, name: str, *phases: str, timeout: float = 60) -> Obj:
        wait_until(lambda: self.phase(kind, name) in phases, timeout=timeout, what=f"{kind} {name} phase in {phases}")
        return self.get(kind, name)

    def wait_condition(self, kind: str, name: str, type_: str, timeout: float = 60) -> Obj:
        """For condition-only kinds (AscendJob): wait until ``type_`` is True."""
        wait_until(lambda: (self.condition(kind, name, type_) or {}).get("status") == "True", timeout=timeout,
                   what=f"{kind} {name} condition {type_}")  # fmt: skip
        return self.get(kind, name)

    def condition(self, kind: str, name: str, type_: str) -> Obj | None:
        conds = (self.get(kind, name).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == type_), None)

    def pods(self, job: str) -> dict[str, client.V1Pod]:
        items = self.core.list_namespaced_pod(self.ns, label_selector=f"batch.tensorstack.dev/job-name={job}").items
        return {p.metadata.name: p for p in items}

    def live_pods(self, job: str) -> dict[str, client.V1Pod]:
        return {n: p for n, p in self.pods(job).items() if not p.metadata.deletion_timestamp}

    def events(self, name: str) -> list[client.CoreV1Event]:
        return self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items

    def reasons(self, name: str, *expected: str, count: int = 1, timeout: float = 15) -> list[str]:
        """The reasons of the Events on ``name``, once each ``expected`` one shows ``count`` times.

        The controller records Events after the status write they belong to (status first,
        then act), so a test that saw the new phase may look a moment before its Event exists.
        """
        found: list[str] = []

        def ready() -> bool:
            found[:] = [e.reason for e in self.events(name)]
            return all(found.count(r) >= count for r in expected)

        wait_until(ready, timeout=timeout, what=f"Events {expected} on {name}")
        return found
