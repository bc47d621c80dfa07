"""The api-server's reads and writes of jobs, on the ``kubernetes`` connection the UI is given.

Jobs of all DAGs are read by label selector with one LIST per kind (Kubernetes has no list
across resources), never one request per job, and that result is shared by every request for
``CACHE_SECONDS``, so a page polled by many users costs the API server the same. Kinds whose
CRD is not installed are skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_t9k.api import ownership
from airflow_t9k.api.evidence import is_evidence_of
from airflow_t9k.api.paths import child_path, job_path
from airflow_t9k.api.resources import RESOURCES, resource_for
from airflow_t9k.api.runmode import resume_patch
from airflow_t9k.k8s.errors import NotFound, NotServed
from airflow_t9k.ui import view
from airflow_t9k.ui.view import ANNOTATION, JOB_LABEL

Obj = dict[str, Any]
CACHE_SECONDS = 2.0
SELECTOR = f"{ANNOTATION}/dag-id"  # every job an operator submits carries this label
LOG_LINES = 200
UI_LOG_BYTES = 1024 * 1024  # at most 2,000 lines are asked for; a longer answer is cut by the API server


class Reader:
    """``request(method, path, body=None, query=None, content_type=...)`` is the transport (the
    hook's); ``namespace`` empty means every namespace."""

    def __init__(self, request: Callable[..., Obj], namespace: str = "", kinds: list[str] | None = None) -> None:
        self._request = request
        self.namespace = namespace
        self.kinds = kinds or list(RESOURCES)
        self._cache: tuple[float, list[Obj]] | None = None
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=len(self.kinds), thread_name_prefix="t9k-ui-list")
        self.lists = 0  # LIST requests sent, for tests and the benchmark

    def _list(self, kind: str, selector: str) -> list[Obj]:
        self.lists += 1
        try:
            out = self._request("GET", job_path(resource_for(kind), self.namespace or None),
                                query=[("labelSelector", selector)])  # fmt: skip
        except (NotServed, NotFound):
            return []  # this kind's CRD is not installed
        items = list(out.get("items") or [])
        for item in items:  # a LIST leaves kind and apiVersion off its items
            item.setdefault("kind", kind)
        return items

    def _list_all(self, selector: str, kinds: list[str]) -> list[Obj]:
        results = self._pool.map(lambda k: self._list(k, selector), kinds)
        return [job for items in results for job in items]

    def jobs(self, kind: str | None = None) -> list[Obj]:
        """Every job a task submitted (all DAGs; the caller filters by the user's DAGs)."""
        with self._lock:
            if self._cache is None or time.monotonic() - self._cache[0] > CACHE_SECONDS:
                self._cache = (time.monotonic(), self._list_all(SELECTOR, self.kinds))
            jobs = self._cache[1]
        return [j for j in jobs if kind is None or j.get("kind") == kind]

    def recorded_job(self, identity: Obj, key: tuple[str, str, str, int]) -> Obj | None:
        """The job task ``key`` recorded (records.py: kind, namespace, name, uid), by one GET; None
        when it is gone, when the name now belongs to another object (another uid: a job someone
        else created under that name afterwards), or when the job's annotations name another
        task (a record pointing at someone else's job: view.task_job)."""
        if identity["kind"] not in self.kinds or (self.namespace and identity["namespace"] != self.namespace):
            return None
        try:
            job = self._request("GET", job_path(resource_for(identity["kind"]), identity["namespace"], identity["name"]))
        except NotFound:
            return None
        job.setdefault("kind", identity["kind"])
        return job if view.task_job(job, identity, key) else None

    def pods(self, job: Obj) -> list[Obj]:
        """The job's pods: narrowed by its job-name label, kept only when they name the job's uid
        as an owner (a same-named job's pods in the namespace carry the same label)."""
        meta = job["metadata"]
        out = self._request("GET", child_path("Pod", meta["namespace"]), query=[("labelSelector", f"{JOB_LABEL}={meta['name']}")])
        return [p for p in out.get("items") or [] if view.owned_by(p, meta["uid"])]

    def events(self, job: Obj) -> list[Obj]:
        """Events of the job (field-selected by its uid) and of pods (field-selected by kind; the
        caller keeps those of the job's pods' uids), rather than every Event of the namespace."""
        meta = job["metadata"]
        path = child_path("Event", meta["namespace"])
        mine = self._request("GET", path, query=[("fieldSelector", f"involvedObject.uid={meta['uid']}")])
        pods = self._request("GET", path, query=[("fieldSelector", "involvedObject.kind=Pod")])
        return list(mine.get("items") or []) + list(pods.get("items") or [])

    def evidence(self, job: Obj) -> Obj | None:
        """The data of the ConfigMap ``<job>-evidence`` the controller kept before clean-up deleted
        the job's pods (controller/reconcile/evidence.py); None when there is none, or when it is
        not the controller's: only the ConfigMap whose uid the job's status has on record is used
        (anyone who may create ConfigMaps in the namespace could create one of that name first,
        with an ownerReference naming the job). No GET without a record."""
        meta = job["metadata"]
        name = f"{meta['name']}{view.EVIDENCE_SUFFIX}"
        if ownership.recorded_uid(job.get("status"), "ConfigMap", name) is None:
            return None
        try:
            cm = self._request("GET", child_path("ConfigMap", meta["namespace"], name))
        except NotFound:
            return None
        return dict(cm.get("data") or {}) if is_evidence_of(cm, job) else None

    def log(self, namespace: str, pod: str, lines: int = LOG_LINES) -> str:
        query = [("tailLines", str(lines)), ("timestamps", "false"), ("limitBytes", str(UI_LOG_BYTES))]
        return str(self._request("GET", child_path("Pod", namespace, pod, "log"), query=query, raw=True))

    def patch(self, job: Obj, patch: Obj) -> Obj:
        meta = job["metadata"]
        return self._request("PATCH", job_path(resource_for(job["kind"]), meta["namespace"], meta["name"]), body=patch,
                             content_type="application/merge-patch+json")  # fmt: skip

    def pause(self, job: Obj) -> Obj:
        # Paused by a person: no paused-by mark, so a retry of the task leaves it paused.
        return self.patch(job, {"metadata": {"uid": job["metadata"]["uid"]}, "spec": {"runMode": {"pause": {"enabled": True}}}})

    def resume(self, job: Obj) -> Obj:
        return self.patch(job, resume_patch(job["metadata"]["uid"]))

    def delete(self, job: Obj) -> Obj:
        meta = job["metadata"]
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                "preconditions": {"uid": meta["uid"]}}  # fmt: skip
        return self._request("DELETE", job_path(resource_for(job["kind"]), meta["namespace"], meta["name"]), body=body)

    def scale(self, job: Obj, replicas: int) -> Obj:
        meta = job["metadata"]
        path = job_path(resource_for(job["kind"]), meta["namespace"], meta["name"], "scale")
        return self._request("PATCH", path, body={"spec": {"replicas": replicas}}, content_type="application/merge-patch+json")
