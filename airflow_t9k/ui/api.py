"""The FastAPI app the plugin mounts on the api-server under ``/t9k``.

Every JSON endpoint sits behind Airflow's authentication and the auth manager: job data needs
read access to the DAG's task instances, logs the task-logs entity, and actions edit access
(``PUT``) on the DAG's task instances. Which job is a task's comes from Airflow's records, not
from the job (records.py): the task instance must exist (404 otherwise; with ``multi_team`` a
DAG id Airflow does not know has no team, so the access check alone would pass anyone), and
its job is the one it recorded in XCom ``t9k_job``. What the controller kept before clean-up
(ConfigMap ``<job>-evidence``) is used only when the job's uid is its controller. The page's list keeps the jobs of DAGs the
user may read whose uid is the one their task recorded. Only the JavaScript bundles are public
(they hold nothing but code).

A recorded job counts only when its annotations also name the task (view.task_job): the
record is written by the task's own code, and a uid is no secret.

Settings (``[t9k]``): ``ui_kubernetes_conn_id`` (default ``kubernetes_default``), the
connection whose identity reads and changes jobs; ``ui_namespace`` (default empty: every
namespace) to read one namespace only; ``team_namespaces`` (default empty) to tie namespaces to
Airflow teams (teams.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.configuration import conf
from airflow.utils.session import create_session
from fastapi import Body, Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles

from airflow_t9k.api.history import DEFAULT_RUNS, MAX_RUNS
from airflow_t9k.k8s.errors import ApiError, NotFound
from airflow_t9k.ui import attempts, guard, teams, view
from airflow_t9k.ui.reader import Reader
from airflow_t9k.ui.records import (
    TaskRecord,
    audit,
    earlier_tries,
    recorded_uids,
    task_history,
    task_record,
    team_of,
    teams_of,
)

Obj = dict[str, Any]
STATIC = Path(__file__).parent / "static"
TASK = "/api/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/job"
# Seconds to connect to and to wait for the Kubernetes API server on each call: a slow or
# unreachable cluster must not hold the api-server's threads.
REQUEST_TIMEOUT = (5, 20)

app = FastAPI(title="airflow-t9k UI", docs_url=None, redoc_url=None, openapi_url=None)
app.mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="t9k-static")

# The endpoints block on Kubernetes and the metadata database: they run on the UI's own threads,
# not on the api-server's shared pool (anyio's, 40 threads for all of Airflow's sync routes),
# so a slow cluster holds at most these, and Airflow's own pages go on.
UI_THREADS = 8
UI_POOL = ThreadPoolExecutor(max_workers=UI_THREADS, thread_name_prefix="t9k-ui")

_reader: Reader | None = None
_reader_lock = threading.Lock()


def same_site(request: Request) -> None:
    """Refuse a non-GET request a cross-site page could have sent with the user's cookie (guard.py)."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    why = guard.refusal(request.method, headers, request.url.scheme, headers.get("host", ""))
    if why is not None:
        raise HTTPException(403, why)


read_ti = Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))
same_site_only = Depends(same_site)
read_logs = Depends(requires_access_dag("GET", DagAccessEntity.TASK_LOGS))
edit_ti = Depends(requires_access_dag("PUT", DagAccessEntity.TASK_INSTANCE))


def hook_transport(hook: Any) -> Any:
    """The hook's API client and error translation, answering JSON or (``raw``) text."""

    def request(method: str, path: str, *, body: Any = None, query: list[tuple[str, str]] | None = None,
                content_type: str = "application/json", raw: bool = False) -> Any:  # fmt: skip
        try:
            api_client = hook.api_client
        except Exception as exc:  # noqa: BLE001 - a missing or broken connection, said plainly
            raise HTTPException(503, f"the T9k UI cannot use its Kubernetes connection {hook.conn_id!r} "
                                     f"([t9k] ui_kubernetes_conn_id): {exc}") from None  # fmt: skip
        with hook._boundary(method, path):
            resp = api_client.call_api(
                path, method, query_params=query or [], body=body, auth_settings=["BearerToken"], _preload_content=False,
                header_params={"Accept": "*/*" if raw else "application/json", "Content-Type": content_type},
                _request_timeout=REQUEST_TIMEOUT,
            )  # fmt: skip
        data = resp.data.decode("utf-8", errors="replace") if resp.data else ""
        if raw:
            return data
        return json.loads(data) if data else {}

    return request


def reader() -> Reader:
    """One reader (one connection pool, one shared list cache) per api-server process."""
    global _reader
    with _reader_lock:
        if _reader is None:
            from airflow_t9k.hooks.t9k import T9kHook

            hook = T9kHook(conn_id=conf.get("t9k", "ui_kubernetes_conn_id", fallback="kubernetes_default"))
            hook.side = "api-server"
            _reader = Reader(hook_transport(hook), namespace=conf.get("t9k", "ui_namespace", fallback="") or "")
        return _reader


def off_pool(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The endpoint as a coroutine running ``fn`` on UI_POOL (FastAPI reads ``fn``'s signature)."""

    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(UI_POOL, functools.partial(fn, *args, **kwargs))

    return run


@app.exception_handler(ApiError)
def _api_error(_: Request, exc: ApiError) -> JSONResponse:
    # What the Kubernetes API server said, for the page to show; 502 because it is upstream's answer.
    status = exc.status if exc.status in (404, 409, 422) else 502
    return JSONResponse({"detail": exc.message or str(exc), "kubernetes_status": exc.status}, status_code=status)


def _teams() -> teams.Teams | None:
    """``[t9k] team_namespaces``; a value that does not parse refuses every request (503) rather
    than showing every namespace."""
    try:
        return teams.parse(conf.get("t9k", "team_namespaces", fallback=""))
    except teams.TeamNamespacesError as exc:
        raise HTTPException(503, str(exc)) from None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _map_index(value: str | None) -> int:
    # The UI passes no mapIndex for an unmapped task; anything that is not a number means -1.
    try:
        return int(value) if value is not None else -1
    except ValueError:
        return -1


@app.get("/api/jobs", dependencies=[read_ti])
@off_pool
def list_jobs(user: GetUserDep, kind: str | None = None, dag_id: str | None = None, phase: str | None = None) -> Obj:
    """Jobs of the DAGs the user may read; ``dag_id`` (checked by the dependency above), ``kind``
    and ``phase`` narrow it."""
    allowed = get_auth_manager().get_authorized_dag_ids(user=user, method="GET")
    if dag_id is not None:
        allowed = allowed & {dag_id}
    now = _now()
    mapping = _teams()
    jobs = view.readable(reader().jobs(kind), allowed)
    keys = {k for k in map(view.task_key, jobs) if k is not None}
    with create_session() as session:
        recorded = recorded_uids(session, keys)  # one query for the whole page
        team = teams_of(session, {k[0] for k in keys}) if mapping is not None else {}
    owned = [j for j in view.owned(jobs, recorded) if teams.allows(mapping, team.get(view.dag_of(j)), j["metadata"]["namespace"])]
    rows = [view.summary(j, now) for j in owned]
    if phase:
        rows = [r for r in rows if r["phase"] == phase]
    rows.sort(key=lambda r: r["created"] or "", reverse=True)
    return {"jobs": rows, "total": len(rows)}


def _record(dag_id: str, run_id: str, task_id: str, map_index: int) -> TaskRecord:
    """What Airflow recorded of the task instance; 404 when there is no such task instance."""
    mapping = _teams()
    with create_session() as session:
        record = task_record(session, (dag_id, run_id, task_id, map_index))
        if record is not None and mapping is not None:
            record = replace(record, team=team_of(session, dag_id))
    if record is None:
        raise HTTPException(404, f"no task instance {dag_id}/{run_id}/{task_id} (map index {map_index})")
    return record


def _task_job(key: tuple[str, str, str, int], record: TaskRecord, identity: Obj | None) -> Obj | None:
    """The job ``identity`` names, as it is now, when it is the task's (Reader.recorded_job) and in
    a namespace of the DAG's team; None otherwise."""
    if identity is None or not teams.allows(_teams(), record.team, identity["namespace"]):
        return None
    return reader().recorded_job(identity, key)


def _job(dag_id: str, run_id: str, task_id: str, map_index: int) -> Obj | None:
    """The job the task instance recorded, as it is now; 404 when there is no such task instance."""
    key = (dag_id, run_id, task_id, map_index)
    record = _record(*key)
    return _task_job(key, record, record.identity)


def _attempts(key: tuple[str, str, str, int], record: TaskRecord, current: Obj | None) -> list[Obj]:
    """The earlier tries and their jobs (ui/attempts.py): each job by one GET of the uid the task
    recorded, its pods and, once finished, its own evidence ConfigMap."""
    with create_session() as session:
        earlier = earlier_tries(session, key, record.try_number)
    current_uid = current["metadata"]["uid"] if current is not None else None
    r, rows = reader(), []
    for e in earlier:
        ident = e["job"]
        job = _task_job(key, record, ident) if ident is not None and ident["uid"] != current_uid else None
        pods = r.pods(job) if job is not None else []
        evidence = r.evidence(job) if job is not None and view.phase(job) in view.FINISHED else None
        rows.append(attempts.row(e, job, pods, evidence, current_uid))
    return rows


def _require_job(dag_id: str, run_id: str, task_id: str, map_index: int) -> Obj:
    job = _job(dag_id, run_id, task_id, map_index)
    if job is None:
        raise HTTPException(404, f"task {task_id} of run {run_id} submitted no T9k job")
    return job


def may_read_logs(user: Any, dag_id: str) -> bool:
    """Whether ``user`` may read the DAG's task logs (the auth manager's TASK_LOGS entity)."""
    try:
        return bool(get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.TASK_LOGS,
                                                          details=DagDetails(id=dag_id), user=user))  # fmt: skip
    except Exception:  # noqa: BLE001 - an auth manager that cannot say: the lines stay out
        return False


def without_kept_logs(answer: Obj) -> Obj:
    """``answer`` without the replicas' log lines the controller kept (``kept.replicas[].log``, in
    the job and each earlier attempt): they are task logs, for users who may read task logs
    (the ``/log`` endpoint serves them to those)."""
    for holder in [answer.get("job") or {}, *(answer.get("attempts") or [])]:
        for replica in (holder.get("kept") or {}).get("replicas") or []:
            if isinstance(replica, dict) and replica.get("log") is not None:
                replica["log"] = None
    return answer


@app.get(TASK, dependencies=[read_ti])
@off_pool
def job_detail(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str | None = None) -> Obj:
    """The task's job with replicas and Events (``job`` is null when the task submitted none), and
    its earlier tries with their jobs (``attempts``, newest first); the log lines kept before
    clean-up only for a user who may read the DAG's task logs."""
    answer = _job_detail(dag_id, run_id, task_id, map_index)
    return answer if may_read_logs(user, dag_id) else without_kept_logs(answer)


def _job_detail(dag_id: str, run_id: str, task_id: str, map_index: str | None) -> Obj:
    key = (dag_id, run_id, task_id, _map_index(map_index))
    record = _record(*key)
    job = _task_job(key, record, record.identity)
    earlier = _attempts(key, record, job)
    if job is None:
        return {"job": None, "attempts": earlier,
                "message": "This task has not submitted a T9k job (or its job was deleted)."}  # fmt: skip
    r = reader()
    pods = r.pods(job)
    # The evidence ConfigMap exists only once clean-up has begun, after the job finished.
    evidence = r.evidence(job) if view.phase(job) in view.FINISHED else None
    return {"job": view.detail(job, pods, r.events(job), _now(), evidence), "attempts": earlier}


@app.get(TASK + "/history", dependencies=[read_ti])
@off_pool
def history(dag_id: str, run_id: str, task_id: str, map_index: str | None = None, limit: int = DEFAULT_RUNS) -> Obj:
    """The task's last ``limit`` runs up to this one (default 30, at most 500), newest first: each
    run's metrics, duration, queue time, GPU-hours, restarts, outcome and flagged regressions, from
    Airflow's XCom (api/history.py): it outlives the jobs. 404 for a task instance Airflow lacks."""
    key = (dag_id, run_id, task_id, _map_index(map_index))
    _record(*key)
    with create_session() as session:
        runs = task_history(session, key, max(1, min(int(limit), MAX_RUNS)))
    return {"runs": runs, "limit": limit}


@app.get(TASK + "/log", dependencies=[read_logs], response_class=PlainTextResponse)
@off_pool
def job_log(dag_id: str, run_id: str, task_id: str, pod: str, map_index: str | None = None, lines: int = 200) -> str:
    """The last ``lines`` lines (at most 2000) of one replica of the task's job; of a replica
    clean-up deleted, the lines the controller kept in the job's evidence ConfigMap."""
    job = _require_job(dag_id, run_id, task_id, _map_index(map_index))
    lines = max(1, min(lines, 2000))
    pods = {p["metadata"]["name"] for p in reader().pods(job)}
    if pod not in pods:
        evidence = reader().evidence(job) if view.phase(job) in view.FINISHED else None
        text = view.kept_log(evidence, pod) if evidence else None
        if text is None:
            raise HTTPException(404, f"{pod} is not a replica of {job['metadata']['name']}")
        return f"(kept at clean-up: the pod is gone)\n{view.tail(text, lines)}"
    try:
        return reader().log(job["metadata"]["namespace"], pod, lines)
    except NotFound:
        return ""
    except ApiError as exc:  # a pod not started yet has no log: say so in the log pane
        return f"(no log yet: {exc.message})"


def _action_result(verb: str, job: Obj, answer: Obj) -> Obj:
    """What was done and what the API server answered (the object's kind and, for a scale, the
    replicas it now asks for)."""
    meta = job["metadata"]
    said = f"{answer.get('kind') or 'Status'} accepted"
    if answer.get("kind") == "Scale":
        said += f": spec.replicas={(answer.get('spec') or {}).get('replicas')}"
    return {"done": verb, "kind": job["kind"], "name": meta["name"], "namespace": meta["namespace"],
            "message": f"{job['kind']} {meta['namespace']}/{meta['name']} {verb} ({said})"}  # fmt: skip


def _acted(user: Any, verb: str, key: tuple[str, str, str, int], job: Obj, answer: Obj) -> Obj:
    """The action's result, after writing it to Airflow's audit log."""
    result = _action_result(verb, job, answer)
    with create_session() as session:
        audit(session, user=user.get_name(), action=verb.split()[0], key=key, job=job, detail=result["message"])
    return result


ACTION = [edit_ti, same_site_only]


@app.post(TASK + "/pause", dependencies=ACTION)
@off_pool
def pause(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str | None = None) -> Obj:
    key = (dag_id, run_id, task_id, _map_index(map_index))
    job = _require_job(*key)
    if job["kind"] not in view.PAUSABLE:
        raise HTTPException(422, f"{job['kind']} cannot be paused")
    return _acted(user, "paused", key, job, reader().pause(job))


@app.post(TASK + "/resume", dependencies=ACTION)
@off_pool
def resume(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str | None = None) -> Obj:
    key = (dag_id, run_id, task_id, _map_index(map_index))
    job = _require_job(*key)
    return _acted(user, "resumed", key, job, reader().resume(job))


@app.post(TASK + "/delete", dependencies=ACTION)
@off_pool
def delete(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str | None = None) -> Obj:
    key = (dag_id, run_id, task_id, _map_index(map_index))
    job = _require_job(*key)
    return _acted(user, "deleted", key, job, reader().delete(job))


@app.post(TASK + "/scale", dependencies=ACTION)
@off_pool
def scale(user: GetUserDep, dag_id: str, run_id: str, task_id: str, replicas: Any = Body(embed=True),
          map_index: str | None = None) -> Obj:  # fmt: skip
    key = (dag_id, run_id, task_id, _map_index(map_index))
    job = _require_job(*key)
    problem = view.scale_error(job, replicas)
    if problem:
        raise HTTPException(422, problem)
    return _acted(user, f"scaled to {replicas}", key, job, reader().scale(job, replicas))
