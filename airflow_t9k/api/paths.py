"""REST paths for jobs and their children: one request builder for every client we use."""

from __future__ import annotations

from airflow_t9k.api.resources import JobResource

CORE_PLURALS = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps", "Secret": "secrets", "Event": "events"}


def _path(base: str, plural: str, namespace: str | None, name: str | None, sub: str | None) -> str:
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
        if sub:
            parts.append(sub)
    return "/".join(parts)


def job_path(resource: JobResource, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    return _path(f"/apis/{resource.group}/{resource.version}", resource.plural, namespace, name, sub)


def core_path(kind: str, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    return _path("/api/v1", CORE_PLURALS[kind], namespace, name, sub)
