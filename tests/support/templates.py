"""Job templates for tests (docs/templates.md): namespaced ones in the test's namespace, cluster
ones under unique names, deleted afterwards (another test's cluster templates are not ours)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.jobs import refused

Obj = dict[str, Any]
GROUP, VERSION = "batch.tensorstack.dev", "v1beta1"


def template(name: str, job_kind: str, pod: Obj | None = None, cluster: bool = False, **spec: Any) -> Obj:
    body: Obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterT9kJobTemplate" if cluster else "T9kJobTemplate",
                 "metadata": {"name": name}, "spec": {"jobKind": job_kind, **spec}}  # fmt: skip
    if pod is not None:
        body["spec"]["template"] = pod
    return body


class Templates:
    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.ns = namespace
        self.cluster_names: list[str] = []

    def create(self, body: Obj) -> Obj:
        body = copy.deepcopy(body)
        if body["kind"] == "ClusterT9kJobTemplate":
            self.cluster_names.append(body["metadata"]["name"])
            return self.api.create_cluster_custom_object(GROUP, VERSION, "clustert9kjobtemplates", body)
        return self.api.create_namespaced_custom_object(GROUP, VERSION, self.ns, "t9kjobtemplates", body)

    def rejected(self, body: Obj) -> str:
        """Create a template the API server must refuse at admission (422); the refusal's text."""
        return refused(self.create, body)

    def patch(self, name: str, body: Obj) -> Obj:
        return self.api.patch_namespaced_custom_object(GROUP, VERSION, self.ns, "t9kjobtemplates", name, body)

    def delete(self, name: str) -> None:
        self.api.delete_namespaced_custom_object(GROUP, VERSION, self.ns, "t9kjobtemplates", name)

    def cleanup(self) -> None:
        for name in self.cluster_names:
            try:
                self.api.delete_cluster_custom_object(GROUP, VERSION, "clustert9kjobtemplates", name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"
