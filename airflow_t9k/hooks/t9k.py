"""Hooks for T9k jobs on the ``kubernetes`` connection type of the cncf-kubernetes provider.

Configuration (kubeconfig path or contents, in-cluster, context, extras) is resolved by the
provider's ``KubernetesHook``/``AsyncKubernetesHook``; we only add job verbs. Each hook
keeps one API client for all its calls, and the async hook reloads exec-based credentials
before each call (the provider's loader does that only for exec auth), so short-lived
tokens keep refreshing on a long-lived triggerer.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook
from kubernetes.client.exceptions import ApiException
from kubernetes_asyncio import client as async_client

from airflow_t9k.api.paths import child_path, job_path
from airflow_t9k.api.resources import resource_for
from airflow_t9k.k8s.client import Kube
from airflow_t9k.k8s.errors import ApiError, NotFound, from_response

Obj = dict[str, Any]
JOB_NAME_LABEL = "batch.tensorstack.dev/job-name"


def _translate(exc: ApiException) -> ApiError:
    body = exc.body.decode() if isinstance(exc.body, bytes) else (exc.body or exc.reason or "")
    return from_response(int(exc.status or 0), str(body))


class T9kHook(KubernetesHook):
    """Create, read, patch and delete T9k jobs of any kind; list their pods, logs and events."""

    hook_name = "T9k Jobs (Kubernetes)"

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            raise _translate(exc) from exc

    def _request(self, method: str, path: str, body: Any = None, query: list | None = None,
                 content_type: str = "application/json") -> Obj:  # fmt: skip
        import json

        resp = self._call(
            self.api_client.call_api, path, method, query_params=query or [], body=body,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            auth_settings=["BearerToken"], _preload_content=False,
        )  # fmt: skip
        data = resp.data.decode() if resp.data else ""
        return json.loads(data) if data else {}

    def create_job(self, job: Obj, namespace: str) -> Obj:
        return self._request("POST", job_path(resource_for(job["kind"]), namespace), body=job)

    def get_job(self, kind: str, name: str, namespace: str) -> Obj | None:
        try:
            return self._request("GET", job_path(resource_for(kind), namespace, name))
        except NotFound:
            return None

    def patch_job(self, kind: str, name: str, namespace: str, patch: Obj) -> Obj:
        return self._request("PATCH", job_path(resource_for(kind), namespace, name), body=patch,
                             content_type="application/merge-patch+json")  # fmt: skip

    def delete_job(self, kind: str, name: str, namespace: str, uid: str | None = None) -> bool:
        """Delete (children are garbage-collected); False when it was already gone."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._request("DELETE", job_path(resource_for(kind), namespace, name), body=body)
            return True
        except NotFound:
            return False

    def list_jobs(self, kind: str, namespace: str, label_selector: str) -> list[Obj]:
        out = self._request("GET", job_path(resource_for(kind), namespace), query=[("labelSelector", label_selector)])
        return list(out.get("items") or [])

    def list_replica_pods(self, name: str, namespace: str) -> list[Obj]:
        out = self._request("GET", child_path("Pod", namespace), query=[("labelSelector", f"{JOB_NAME_LABEL}={name}")])
        return list(out.get("items") or [])

    def read_log_tail(self, pod: str, namespace: str, lines: int) -> str:
        try:
            return str(self._call(self.core_v1_client.read_namespaced_pod_log, pod, namespace, tail_lines=lines))
        except ApiError as exc:
            return f"(log not available: {exc.message or exc.reason})"

    def list_events(self, name: str, namespace: str) -> list[Obj]:
        out = self._request("GET", child_path("Event", namespace), query=[("fieldSelector", f"involvedObject.name={name}")])
        return list(out.get("items") or [])


class AsyncT9kHook(AsyncKubernetesHook):
    """The async side, for the trigger: one ``Kube`` client, reused for every call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kube: Kube | None = None

    async def kube(self) -> Kube:
        await self._load_config()  # no-op for static credentials; refreshes exec tokens
        if self._kube is None:
            self._kube = Kube(async_client.ApiClient(configuration=self.client_configuration))
        return self._kube

    async def close(self) -> None:
        if self._kube is not None:
            await self._kube.close()
            self._kube = None

    async def get_job(self, kind: str, name: str, namespace: str) -> Obj | None:
        try:
            return await (await self.kube()).get(job_path(resource_for(kind), namespace, name))
        except NotFound:
            return None

    async def delete_job(self, kind: str, name: str, namespace: str, uid: str | None = None) -> bool:
        try:
            await (await self.kube()).delete(job_path(resource_for(kind), namespace, name), uid=uid)
            return True
        except NotFound:
            return False

    async def patch_job(self, kind: str, name: str, namespace: str, patch: Obj) -> Obj:
        return await (await self.kube()).patch(job_path(resource_for(kind), namespace, name), body=patch)

    async def read_log_tail(self, pod: str, namespace: str, lines: int) -> str:
        kube = await self.kube()
        try:
            resp = await kube._send("GET", child_path("Pod", namespace, pod, "log"), query={"tailLines": lines})
            text = (await resp.read()).decode(errors="replace")
            ok = 200 <= resp.status < 300
            resp.release()
            return text if ok else f"(log not available: {from_response(resp.status, text).message})"
        except OSError as exc:
            return f"(log not available: {exc})"
