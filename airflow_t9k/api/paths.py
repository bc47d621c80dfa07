"""REST paths for jobs and their children: one request builder for every client we use."""

from __future__ import annotations

from airflow_t9k.api.resources import JobResource

CORE_PLURALS = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps", "Secret": "secrets", "Event": "events"}


def job_path(resource: JobResource, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    path = f"/apis/{resource.group}/{resource.version}"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{resource.plural}"
    if name:
        path += f"/{name}"
        if sub:
            path += f"/{sub}"
    return path


def core_path(kind: str, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    path = "/api/v1"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{CORE_PLURALS[kind]}"
    if name:
        path += f"/{name}"
        if sub:
            path += f"/{sub}"
    return path
