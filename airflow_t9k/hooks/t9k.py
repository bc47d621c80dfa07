"""Hooks for T9k jobs on the ``kubernetes`` connection type of the cncf-kubernetes provider.

Configuration (kubeconfig path or contents, in-cluster, context, extras) is resolved by the
provider's ``KubernetesHook``/``AsyncKubernetesHook``; we only add job verbs. Each hook
keeps one API client for all its calls, and the async hook reloads exec-based credentials
before each call (the provider's loader does that only for exec auth), so short-lived
tokens keep refreshing on a long-lived triggerer.

This is the boundary where client exceptions become the vocabulary of
``airflow_t9k.k8s.errors``, each with one sentence naming the cause and the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, Protocol

import aiohttp
import urllib3
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException
from kubernetes_asyncio import client as async_client

from airflow_t9k.api.evidence import controlled_by, evidence_name
from airflow_t9k.api.paths import LOG_LIMIT_BYTES, LOG_LINE_BYTES, child_path, job_path
from airflow_t9k.api.resources import resource_for
from airflow_t9k.k8s.client import Kube, LineSplitter
from airflow_t9k.k8s.errors import ApiError, Forbidden, NotFound, NotServed, Unauthorized, Unreachable, from_response

Obj = dict[str, Any]
JOB_NAME_LABEL = "batch.tensorstack.dev/job-name"
INSTALL_CRDS = "airflow-t9k crds | kubectl apply --server-side -f -"
VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
MAX_REASON = 600  # characters of scheduler reasons in a message
READ_SIZE = 1 << 16  # bytes of a log answer taken at a time


def bounded_log(chunks: Iterable[bytes]) -> str:
    """A pod log answer as text, split as the followers split a stream (``LineSplitter(log=True)``):
    each line at most ``LOG_LINE_BYTES`` after its stamp, with the cut mark, of its ``\r``
    redraws the last; the answer is never held whole (up to ``LOG_LIMIT_BYTES`` of it)."""
    splitter = LineSplitter(LOG_LINE_BYTES, log=True)
    return _text([line for chunk in chunks for line in splitter.feed(chunk)] + splitter.flush())


async def bounded_log_async(resp: Any) -> str:
    """``bounded_log`` of an aiohttp answer, as its chunks arrive."""
    splitter = LineSplitter(LOG_LINE_BYTES, log=True)
    lines: list[bytes] = []
    async for chunk in resp.content.iter_any():
        lines += splitter.feed(chunk)
    return _text(lines + splitter.flush())


def _text(lines: list[bytes]) -> str:
    return "".join(line.decode("utf-8", errors="replace") + "\n" for line in lines)


def _target(path: str) -> tuple[str, str, bool]:
    """(resource as RBAC names it, namespace, whether the path names one object) of a REST path."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    group = "" if parts[:1] == ["api"] else (parts[1] if len(parts) > 1 else "")
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    plural = rest[0] if rest else "namespaces"
    resource = f"{plural}.{group}" if group else plural
    if len(rest) >= 3:  # a subresource such as pods/log
        resource = f"{resource}/{rest[2]}"
    return resource, namespace, len(rest) >= 2


def explain(exc: ApiError, method: str, path: str, who: str, *, watch: bool = False) -> ApiError:
    """The same error class, its message one sentence with the cause and the fix."""
    resource, namespace, named = _target(path)
    verb = "watch" if watch else VERBS.get(method, method.lower())
    if method == "GET" and not named and not watch:
        verb = "list"
    where = f" in namespace {namespace}" if namespace else ""
    if isinstance(exc, NotServed):
        message = (f"the API server does not serve {resource} (404 for the resource type): its CRD is not installed; "
                   f"install the CRDs: {INSTALL_CRDS}")  # fmt: skip
    elif isinstance(exc, Forbidden):
        message = (f"{who} may not {verb} {resource}{where} (403 Forbidden); grant it {verb} on {resource} "
                   f"with a Role and RoleBinding (see docs/airflow.md, RBAC)")  # fmt: skip
    elif isinstance(exc, Unauthorized):
        message = (f"the API server rejected the credentials of {who} (401 Unauthorized); "
                   "renew the token or certificate in the kubeconfig the connection names")  # fmt: skip
    elif isinstance(exc, Unreachable):
        return Unreachable(exc.host, exc.cause, f"; check that the cluster is up and that {who} points at it")
    else:
        return exc
    return type(exc)(exc.status, exc.reason, message, exc.body)


def _translate(exc: ApiException) -> ApiError:
    body = exc.body.decode() if isinstance(exc.body, bytes) else (exc.body or exc.reason or "")
    return from_response(int(exc.status or 0), str(body))


def _no_answer(exc: BaseException) -> str:
    """The innermost reason a request got no answer (urllib3 nests it in MaxRetryError,
    aiohttp in ClientConnectorError), in words rather than a traceback."""
    inner = getattr(exc, "os_error", None) or getattr(exc, "reason", None)
    text = str(inner if isinstance(inner, BaseException) else exc)
    chain = (exc, inner, exc.__cause__, exc.__context__)
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or any(
        s in text for s in ("Connection refused", "ConnectionRefused", "Connect call failed")
    ):
        return "connection refused"
    if isinstance(exc, asyncio.TimeoutError) or any(isinstance(e, TimeoutError) for e in chain):
        return "no answer in time"
    return text.split(": ", 1)[-1][:200] or type(exc).__name__


def describe_pending(pods: list[Obj], events: list[Obj]) -> str:
    """Why replicas have not started, from the scheduler's PodScheduled condition and Events.

    Identical reasons are given once with the pods they apply to, so 64 unschedulable
    replicas make one line, not 64.
    """
    by_reason: dict[str, list[str]] = {}
    warnings: dict[str, str] = {}
    for ev in sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or "")):
        if ev.get("type") == "Warning":
            warnings[str((ev.get("involvedObject") or {}).get("name") or "")] = f"{ev.get('reason')}: {ev.get('message')}"
    for pod in pods:
        name = str(pod["metadata"]["name"])
        status = pod.get("status") or {}
        if status.get("phase") not in (None, "Pending"):
            continue
        reason = ""
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                reason = f"{cond.get('reason') or 'Unschedulable'}: {cond.get('message') or ''}".strip()
        for cs in status.get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if not reason and waiting.get("reason") and waiting["reason"] != "ContainerCreating":
                reason = f"{waiting['reason']}: {waiting.get('message') or ''}".strip(": ")
        reason = reason or warnings.get(name, "") or "Pending (no reason reported yet)"
        by_reason.setdefault(reason, []).append(name)
    if not by_reason:
        job_warnings = [w for n, w in warnings.items() if n and not any(n == p["metadata"]["name"] for p in pods)]
        return "; ".join(job_warnings)[:MAX_REASON] or "no replica pod is pending; the job has not reported Running yet"
    text = "; ".join(f"{', '.join(names[:3])}{f' and {len(names) - 3} more' if len(names) > 3 else ''}: {reason}"
                     for reason, names in by_reason.items())  # fmt: skip
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


class KubeConfigError(AirflowException):
    """The hook cannot load its Kubernetes configuration; the message names whose and the fix."""


def config_fix(exc: BaseException) -> str:
    """What to do about an exception loading a Kubernetes configuration, in one sentence."""
    text = str(exc)
    if isinstance(exc, AirflowNotFoundException) or "isn't defined" in text:
        return ("create that kubernetes connection (Admin > Connections, or an AIRFLOW_CONN_<ID> variable) on the workers "
                "and the triggerer, or pass the kubernetes_conn_id of one that exists")  # fmt: skip
    if "Service host/port is not set" in text:
        return "in_cluster is set but this process does not run in a pod: unset in_cluster and give a kubeconfig"
    if "context" in text.lower():
        return "set cluster_context= (or the connection's cluster_context) to one of the kubeconfig's contexts"
    if isinstance(exc, (FileNotFoundError, IsADirectoryError)) or "No configuration found" in text or "does not exist" in text:
        return ("point config_file= (or the connection's kube_config_path) at a kubeconfig readable on this machine: "
                "mount the same file on the workers and the triggerer")  # fmt: skip
    return "check the connection's kubeconfig (kube_config_path, kube_config, in_cluster, cluster_context)"


class _Identified(Protocol):
    """What ``identity`` reads: both hooks have it (the async one borrows the method)."""

    @property
    def side(self) -> str: ...
    @property
    def config_file(self) -> str | None: ...
    @property
    def conn_id(self) -> Any: ...
    @property
    def in_cluster(self) -> Any: ...


class T9kHook(KubernetesHook):
    """Create, read, patch and delete T9k jobs of any kind; list their pods, logs and events."""

    hook_name = "T9k Jobs (Kubernetes)"
    side = "worker"

    def _config_error(self, exc: BaseException) -> KubeConfigError:
        cause = str(exc).strip() or type(exc).__name__
        return KubeConfigError(f"{self.identity()} cannot load its Kubernetes configuration ({cause}); {config_fix(exc)}")

    def get_conn(self) -> Any:
        """The provider's client; a configuration it cannot load raised as one sentence naming
        the connection and the fix, not the client library's ConfigException."""
        try:
            return super().get_conn()
        except (ConfigException, AirflowNotFoundException, FileNotFoundError, IsADirectoryError) as exc:
            raise self._config_error(exc) from None

    def get_namespace(self) -> str | None:
        try:
            return super().get_namespace()
        except AirflowNotFoundException as exc:
            raise self._config_error(exc) from None

    def identity(self: _Identified) -> str:
        """Whose credentials, for messages: the side, and where its configuration comes from."""
        source = f"kubeconfig {self.config_file}" if self.config_file else f"connection {self.conn_id!r}"
        if self.in_cluster:
            source = "the in-cluster ServiceAccount"
        return f"the {self.side}'s identity ({source})"

    def _host(self) -> str:
        try:
            return str(self.api_client.configuration.host)
        except Exception:  # noqa: BLE001 - only for a message
            return ""

    @contextlib.contextmanager
    def boundary(self, method: str, path: str) -> Iterator[None]:
        """Client exceptions raised inside become ``k8s.errors`` ones, explained in one sentence."""
        with self._boundary(method, path):
            yield

    @contextlib.contextmanager
    def _boundary(self, method: str, path: str) -> Iterator[None]:
        try:
            yield
        except ApiException as exc:
            raise explain(_translate(exc), method, path, self.identity()) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise explain(Unreachable(self._host(), _no_answer(exc)), method, path, self.identity()) from None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self._boundary("GET", ""):
            return fn(*args, **kwargs)

    def _request(self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None,
                 content_type: str = "application/json") -> Obj:  # fmt: skip
        with self._boundary(method, path):
            resp = self.api_client.call_api(
                path, method, query_params=query or [], body=body,
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
        except NotServed:
            raise
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
        except NotServed:
            raise
        except NotFound:
            return False

    def list_jobs(self, kind: str, namespace: str, label_selector: str) -> list[Obj]:
        out = self._request("GET", job_path(resource_for(kind), namespace), query=[("labelSelector", label_selector)])
        return list(out.get("items") or [])

    def get_pod(self, name: str, namespace: str) -> Obj | None:
        try:
            return self._request("GET", child_path("Pod", namespace, name))
        except NotFound:
            return None

    def list_replica_pods(self, name: str, namespace: str, owner_uid: str | None = None) -> list[Obj]:
        """The job's replica pods; with ``owner_uid``, only those whose controller is that job:
        anyone who may create pods can label one with the job's name."""
        out = self._request("GET", child_path("Pod", namespace), query=[("labelSelector", f"{JOB_NAME_LABEL}={name}")])
        return owned(list(out.get("items") or []), owner_uid)

    def read_log_tail(self, pod: str, namespace: str, lines: int | None, timestamps: bool = False,
                      since: str | None = None) -> str:  # fmt: skip
        """The last ``lines`` lines of the pod's log (None: all of it), from ``since`` (an RFC 3339
        ``sinceTime``) on, each line stamped with ``timestamps`` (to tell lines already streamed
        from new ones), each bounded (``bounded_log``)."""
        path = child_path("Pod", namespace, pod, "log")
        query: list[tuple[str, Any]] = [("tailLines", lines)] if lines is not None else []
        query.append(("limitBytes", LOG_LIMIT_BYTES))  # bounded whatever the replica printed
        if timestamps:
            query.append(("timestamps", "true"))
        if since:
            query.append(("sinceTime", since))
        try:
            with self._boundary("GET", path):
                resp = self.api_client.call_api(
                    path, "GET", query_params=query, header_params={"Accept": "application/json"},
                    auth_settings=["BearerToken"], _preload_content=False,
                )  # fmt: skip
            try:
                return bounded_log(resp.stream(READ_SIZE, decode_content=True))
            finally:
                resp.release_conn()
        except ApiError as exc:
            return f"(log not available: {exc.message or exc.reason})"

    def get_evidence(self, name: str, namespace: str) -> Obj | None:
        """The ConfigMap ``<job>-evidence`` the controller keeps before clean-up (api/evidence.py
        decides whether it is the job's own); None when there is none."""
        try:
            return self._request("GET", child_path("ConfigMap", namespace, evidence_name(name)))
        except NotFound:
            return None

    def list_events(self, name: str, namespace: str) -> list[Obj]:
        out = self._request("GET", child_path("Event", namespace), query=[("fieldSelector", f"involvedObject.name={name}")])
        return list(out.get("items") or [])

    def pending_reason(self, name: str, namespace: str, owner_uid: str | None = None) -> str:
        """Why the job's replicas have not started (scheduler conditions and Warning Events)."""
        events = self._request("GET", child_path("Event", namespace), query=[("fieldSelector", "type=Warning")])
        pods = self.list_replica_pods(name, namespace, owner_uid)
        return describe_pending(pods, _about(name, events, _uids(owner_uid, pods)))


def owned(pods: list[Obj], owner_uid: str | None) -> list[Obj]:
    """``pods`` whose controller is the job with ``owner_uid`` (all of them without one)."""
    return pods if not owner_uid else [p for p in pods if controlled_by(p, owner_uid)]


def _uids(owner_uid: str | None, pods: list[Obj]) -> set[str] | None:
    if not owner_uid:
        return None
    return {owner_uid, *(str((p.get("metadata") or {}).get("uid")) for p in pods)}


def _about(name: str, events: Obj, uids: set[str] | None = None) -> list[Obj]:
    """The Events of the job and of its replica pods: by ``involvedObject.uid`` (``uids``: the job's
    and its own pods'), since anyone who may create Events can name any object in one; without
    ``uids``, by the pods' ``<job>-`` name prefix."""
    out = []
    for ev in events.get("items") or []:
        involved = ev.get("involvedObject") or {}
        if uids is not None:
            if involved.get("uid") in uids:
                out.append(ev)
            continue
        name_ = str(involved.get("name") or "")
        if name_ == name or name_.startswith(f"{name}-"):
            out.append(ev)
    return out


class AsyncT9kHook(AsyncKubernetesHook):
    """The async side, for the trigger: one ``Kube`` client, reused for every call.

    It resolves credentials itself, on the triggerer, from what the trigger carries (the
    connection id, a kubeconfig path, a context, in-cluster): never from credentials passed
    in the trigger's stored arguments.
    """

    side = "triggerer"
    identity = T9kHook.identity

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kube: Kube | None = None

    async def _get_field(self, field_name: str) -> Any:
        # The provider's async loader reads only the connection's path; ``config_file``
        # (the operator's argument) comes first, as in the sync hook.
        if field_name == "kube_config_path" and self.config_file:
            return self.config_file
        return await super()._get_field(field_name)  # type: ignore[no-untyped-call]  # Airflow's, unannotated

    async def kube(self) -> Kube:
        # A no-op for static credentials; refreshes exec tokens.
        await self._load_config()  # type: ignore[no-untyped-call]  # Airflow's, unannotated
        if self._kube is None:
            self._kube = Kube(async_client.ApiClient(configuration=self.client_configuration))
        return self._kube

    async def close(self) -> None:
        if self._kube is not None:
            await self._kube.close()
            self._kube = None

    def host(self) -> str:
        return str(getattr(self.client_configuration, "host", "") or "")

    def translate(self, exc: BaseException, method: str, path: str, *, watch: bool = False) -> BaseException:
        """Client exceptions (an answer or none) in the vocabulary of ``k8s.errors``, explained."""
        if isinstance(exc, ApiError):
            return explain(exc, method, path, self.identity(), watch=watch)
        if isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError, OSError)):
            return explain(Unreachable(self.host(), _no_answer(exc)), method, path, self.identity())
        return exc

    @contextlib.asynccontextmanager
    async def _boundary(self, method: str, path: str) -> AsyncIterator[None]:
        try:
            yield
        except (ApiError, aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise self.translate(exc, method, path) from None

    async def get_job(self, kind: str, name: str, namespace: str) -> Obj | None:
        path = job_path(resource_for(kind), namespace, name)
        try:
            async with self._boundary("GET", path):
                return await (await self.kube()).get(path)
        except NotServed:
            raise
        except NotFound:
            return None

    async def delete_job(self, kind: str, name: str, namespace: str, uid: str | None = None) -> bool:
        path = job_path(resource_for(kind), namespace, name)
        try:
            async with self._boundary("DELETE", path):
                await (await self.kube()).delete(path, uid=uid)
            return True
        except NotServed:
            raise
        except NotFound:
            return False

    async def patch_job(self, kind: str, name: str, namespace: str, patch: Obj) -> Obj:
        path = job_path(resource_for(kind), namespace, name)
        async with self._boundary("PATCH", path):
            return await (await self.kube()).patch(path, body=patch)

    async def list_replica_pods(self, name: str, namespace: str, owner_uid: str | None = None) -> list[Obj]:
        kube = await self.kube()
        path = child_path("Pod", namespace)
        async with self._boundary("GET", path):
            pods = await kube.get(path, query={"labelSelector": f"{JOB_NAME_LABEL}={name}"})
        return owned(list(pods.get("items") or []), owner_uid)

    async def get_pod(self, name: str, namespace: str) -> Obj | None:
        path = child_path("Pod", namespace, name)
        try:
            async with self._boundary("GET", path):
                return await (await self.kube()).get(path)
        except NotFound:
            return None

    async def pending_reason(self, name: str, namespace: str, owner_uid: str | None = None) -> str:
        kube = await self.kube()
        events_path = child_path("Event", namespace)
        pods = await self.list_replica_pods(name, namespace, owner_uid)
        async with self._boundary("GET", events_path):
            events = await kube.get(events_path, query={"fieldSelector": "type=Warning"})
        return describe_pending(pods, _about(name, events, _uids(owner_uid, pods)))

    async def get_evidence(self, name: str, namespace: str) -> Obj | None:
        path = child_path("ConfigMap", namespace, evidence_name(name))
        try:
            async with self._boundary("GET", path):
                return await (await self.kube()).get(path)
        except NotFound:
            return None

    async def read_log_tail(self, pod: str, namespace: str, lines: int | None, timestamps: bool = False,
                            since: str | None = None) -> str:  # fmt: skip
        kube = await self.kube()
        query: dict[str, Any] = {"tailLines": lines} if lines is not None else {}
        query["limitBytes"] = LOG_LIMIT_BYTES  # bounded whatever the replica printed
        if timestamps:
            query["timestamps"] = "true"
        if since:
            query["sinceTime"] = since
        try:
            resp = await kube._send("GET", child_path("Pod", namespace, pod, "log"), query=query)
            try:
                if not 200 <= resp.status < 300:
                    text = (await resp.read()).decode(errors="replace")
                    return f"(log not available: {from_response(resp.status, text).message})"
                return await bounded_log_async(resp)
            finally:
                resp.release()
        except (OSError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
            return f"(log not available: {exc})"
