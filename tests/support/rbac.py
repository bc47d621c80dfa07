"""Cluster-scoped RBAC objects a test applied from deploy/, removed again afterwards."""

from __future__ import annotations

from typing import Any

from kubernetes import client


def delete_cluster_scoped(api_client: client.ApiClient, docs: list[dict[str, Any]]) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    for d in docs:
        if d["kind"] == "ClusterRole":
            rbac.delete_cluster_role(d["metadata"]["name"])
        elif d["kind"] == "ClusterRoleBinding":
            rbac.delete_cluster_role_binding(d["metadata"]["name"])
