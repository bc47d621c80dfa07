"""What the UI shows of a job, its replicas and Events: plain dicts from Kubernetes objects.

Pure functions (no client, no Airflow), so tables of cases test them.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

# The UI's names for them: re-exported.
from airflow_t9k.api.evidence import EVIDENCE_SUFFIX as EVIDENCE_SUFFIX
from airflow_t9k.api.evidence import controlled_by as controlled_by
from airflow_t9k.api.outcome import condition, usage_of
from airflow_t9k.api.overrun import CONDITION as OVERRUN
from airflow_t9k.api.runmode import PAUSED_BY

Obj = dict[str, Any]

ANNOTATION = "airflow-t9k.io"  # the operator's label and annotation prefix (operators/job.py)
JOB_LABEL = "batch.tensorstack.dev/job-name"
TYPE_LABEL = "batch.tensorstack.dev/replica-type"
RANK_LABEL = "batch.tensorstack.dev/replica-index"
ELASTIC_KINDS = ("PyTorchTrainingJob", "DeepSpeedJob")
PAUSABLE = ("GenericJob", "PyTorchTrainingJob", "TensorFlowTrainingJob", "XGBoostTrainingJob", "ColossalAIJob",
            "DeepSpeedJob", "MPIJob")  # fmt: skip
FINISHED = ("Succeeded", "Failed")
MAX_EVENTS = 100
# What the controller keeps before clean-up (controller/reconcile/evidence.py). It bounds the
# ConfigMap itself; the UI caps again what it returns, in case the object is not as written.
KEPT_REPLICAS = 64
KEPT_LOG_BYTES = 16 * 1024
KEPT_EVENTS = 50
KEPT_TEXT = 2000  # one message, reason or detail
HISTORY_ROWS = 50
# status.progress (docs/progress.md): the controller bounds it; the UI caps again what it returns.
PROGRESS_METRICS = 16
PROGRESS_POINTS = 100
CHART_METRICS = 8


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def task_of(job: Obj) -> Obj | None:
    """The Airflow task that submitted the job, from the operator's exact annotations; None when
    the job was not submitted by a task (or its annotations were edited away)."""
    ann = (job.get("metadata") or {}).get("annotations") or {}
    dag_id = ann.get(f"{ANNOTATION}/dag-id")
    if not dag_id:
        return None
    try:
        map_index = int(ann.get(f"{ANNOTATION}/map-index", "-1"))
    except ValueError:
        map_index = -1
    return {"dag_id": dag_id, "run_id": ann.get(f"{ANNOTATION}/run-id", ""),
            "task_id": ann.get(f"{ANNOTATION}/task-id", ""), "map_index": map_index}  # fmt: skip


def phase(job: Obj) -> str:
    """T9k's ``status.phase``; for Kubeflow-style status (AscendJob) the latest true condition;
    Paused when a pause is asked and nothing says otherwise yet."""
    status = job.get("status") or {}
    if status.get("phase"):
        return str(status["phase"])
    for cond in reversed(status.get("conditions") or []):
        if str(cond.get("status")) == "True":
            return str(cond.get("type"))
    return "Pending"


def paused(job: Obj) -> bool:
    return bool((((job.get("spec") or {}).get("runMode") or {}).get("pause") or {}).get("enabled"))


def counts(job: Obj) -> Obj:
    """Replicas running / succeeded / failed and restarts, from the job's status alone (the list
    never reads pods)."""
    status = job.get("status") or {}
    agg = status.get("aggregate")
    restarts = sum(int(t.get("restartCount") or 0) for t in status.get("tasks") or [])
    if isinstance(agg, dict):
        return {"running": int(agg.get("running") or 0), "succeeded": int(agg.get("succeeded") or 0),
                "failed": int(agg.get("failed") or 0), "restarts": restarts}  # fmt: skip
    out = {"running": 0, "succeeded": 0, "failed": 0, "restarts": restarts}
    for rs in (status.get("replicaStatuses") or {}).values():  # Kubeflow JobStatus
        out["running"] += int(rs.get("active") or 0)
        out["succeeded"] += int(rs.get("succeeded") or 0)
        out["failed"] += int(rs.get("failed") or 0)
    if not restarts:
        out["restarts"] = int(status.get("backoffCount") or 0)
    return out


def elastic(job: Obj) -> Obj | None:
    """``spec.elastic`` when the job runs in Elastic mode (only then can it be scaled)."""
    if job.get("kind") not in ELASTIC_KINDS:
        return None
    spec = (job.get("spec") or {}).get("elastic") or {}
    return spec if spec.get("enabled") else None


def usage(job: Obj, now: datetime) -> Obj | None:
    """Accelerator-hours (all resources together, and per resource name) and the hours restarted
    attempts wasted, from ``status.usage`` (docs/usage.md); runs still going count up to ``now``.
    None when nothing ran."""
    status = job.get("status") or {}
    totals = usage_of(status)
    if not totals:
        return None
    seconds = {k: float(v) for k, v in totals["accelerator_seconds"].items()}
    running = [r for r in (((status.get("usage") or {}).get("open")) or {}).values() if isinstance(r, dict)]
    for run in running:
        start = _time(run.get("start"))
        if start is None:
            continue
        for name, n in (run.get("accelerators") or {}).items():
            if isinstance(n, (int, float)):
                seconds[str(name)] = seconds.get(str(name), 0.0) + n * max((now - start).total_seconds(), 0.0)
    wasted = sum(float(v) for v in totals["wasted_accelerator_seconds"].values())
    return {"accelerator_hours": round(sum(seconds.values()) / 3600, 4),
            "by_resource": {k: round(v / 3600, 4) for k, v in sorted(seconds.items())},
            "wasted_hours": round(wasted / 3600, 4), "running": bool(running)}  # fmt: skip


def summary(job: Obj, now: datetime) -> Obj:
    """One row of the T9k Jobs page."""
    meta = job.get("metadata") or {}
    status = job.get("status") or {}
    created = _time(meta.get("creationTimestamp"))
    started = _time(status.get("startTime")) or created
    ended = _time(status.get("completionTime"))
    ph = phase(job)
    if ended is None and ph in FINISHED:
        ended = _time(((status.get("conditions") or [{}])[-1] or {}).get("lastTransitionTime"))
    return {
        "kind": job.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "task": task_of(job),
        "phase": ph,
        "paused": paused(job),
        "replicas": counts(job),
        "created": meta.get("creationTimestamp"),
        "age_seconds": int((now - created).total_seconds()) if created else None,
        "duration_seconds": int(((ended or now) - started).total_seconds()) if started else None,
        "ended": ended.strftime("%Y-%m-%dT%H:%M:%SZ") if ended else None,
        "elastic": elastic(job),
        "usage": usage(job, now),
        "progress": progress_cell(status),
        "overrun": overrun_badge(status),
    }


def overrun_badge(status: Obj) -> str | None:
    """The controller's word when the job's ETA ends past its task's deadline (condition
    ``PredictedOverrun`` true; docs/progress.md, "A deadline miss seen coming"), else None."""
    c = condition(status, OVERRUN)
    if not c or c.get("status") != "True":
        return None
    return _text(c.get("message") or c.get("reason"), 300)


def progress_cell(status: Obj) -> Obj | None:
    """The Jobs page's Progress cell: what ``kubectl get`` shows (summary, ETA) and the latest
    metrics for its tooltip; None without ``status.progress`` (docs/progress.md)."""
    p = status.get("progress")
    if not isinstance(p, dict):
        return None
    return {
        "summary": _text(p.get("summary"), 64),
        "eta": _text(p.get("eta"), 16),
        "metrics": _metrics(p.get("metrics"), PROGRESS_METRICS),
    }


def readable(jobs: list[Obj], dag_ids: set[str]) -> list[Obj]:
    """Jobs whose exact ``dag-id`` annotation names a DAG in ``dag_ids``. Labels are cut to 63
    characters and sanitised, so they only narrow the LIST; the annotation decides."""
    return [j for j in jobs if (t := task_of(j)) is not None and t["dag_id"] in dag_ids]


def dag_of(job: Obj) -> str:
    """The DAG id the job's annotations name ('' when none)."""
    t = task_of(job)
    return "" if t is None else str(t["dag_id"])


def task_key(job: Obj) -> tuple[str, str, str, int] | None:
    """The task the job's annotations claim; only a hint, until Airflow's records confirm it."""
    t = task_of(job)
    return None if t is None else (t["dag_id"], t["run_id"], t["task_id"], t["map_index"])


def owned(jobs: list[Obj], recorded: dict[tuple[str, str, str, int], str]) -> list[Obj]:
    """Jobs whose uid is the one the task their annotations name recorded (``recorded``: task ->
    uid, records.recorded_uids). A job planted under another team's task claims that task but
    has another uid, so it drops out; so do jobs of earlier tries of the task."""
    out = []
    for job in jobs:
        key = task_key(job)
        uid = (job.get("metadata") or {}).get("uid")
        if key is not None and uid and recorded.get(key) == uid:
            out.append(job)
    return out


def recorded(job: Obj, identity: Obj) -> bool:
    """Whether ``job`` is the very object a task recorded: same kind, namespace, name and uid."""
    meta = job.get("metadata") or {}
    found = (job.get("kind"), meta.get("namespace"), meta.get("name"), meta.get("uid"))
    return found == (identity.get("kind"), identity.get("namespace"), identity.get("name"), identity.get("uid"))


def task_job(job: Obj, identity: Obj, key: tuple[str, str, str, int]) -> bool:
    """Whether ``job`` is the job of the task ``key``: the object the task recorded (``identity``,
    from XCom or the state store, which the task's own code and REST editors can write) *and* a
    job whose annotations name that very task. A uid is no secret (asset events and lineage
    carry it), so a record alone could name any job of any namespace; the annotations alone
    could be copied by anyone who may create a job. Both must hold."""
    return recorded(job, identity) and task_key(job) == key


def _rank(pod: Obj) -> int | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(RANK_LABEL)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def replica(pod: Obj) -> Obj:
    """One row of the replicas table: type, rank, pod, node, phase, restarts, exit code, reason."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    exit_code: int | None = None
    reason = status.get("reason")
    restarts = 0
    for cs in status.get("containerStatuses") or []:
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        term = state.get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if term and (exit_code is None or term.get("exitCode")):
            exit_code = term.get("exitCode")
            reason = reason or term.get("reason")
        waiting = state.get("waiting")
        if waiting and not reason:
            reason = waiting.get("reason")
    # The controller counts restarts across pod re-creation in this annotation; a pod restarted
    # in place counts them in its containers.
    restarts = max(restarts, int((meta.get("annotations") or {}).get("batch.tensorstack.dev/restart-count") or 0))
    return {
        "type": (meta.get("labels") or {}).get(TYPE_LABEL, ""),
        "rank": _rank(pod),
        "pod": meta.get("name"),
        "node": (pod.get("spec") or {}).get("nodeName") or "",
        "phase": "Terminating" if meta.get("deletionTimestamp") else str(status.get("phase") or "Pending"),
        "restarts": restarts,
        "exit_code": exit_code,
        "reason": reason or "",
        "started": status.get("startTime"),
        "finished": _finished(status),
    }


def _finished(status: Obj) -> str | None:
    ends = [((cs.get("state") or {}).get("terminated") or {}).get("finishedAt") for cs in status.get("containerStatuses") or []]
    done: list[str] = [e for e in ends if e]
    return max(done) if done else None


def replicas(pods: list[Obj]) -> list[Obj]:
    """Replica rows in type, then rank order."""
    rows = [replica(p) for p in pods]
    return sorted(rows, key=lambda r: (r["type"], r["rank"] if r["rank"] is not None else 1 << 30, r["pod"] or ""))


def owned_by(obj: Obj, uid: str) -> bool:
    """Whether ``obj`` names the object with ``uid`` among its owners. Labels and names can be
    copied by anyone who may create a pod in the namespace; an owner reference to a uid that
    only the job has cannot be forged into a pod without knowing it, and it is what the
    controller sets."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(r.get("uid") == uid for r in refs)


def _text(value: Any, limit: int = KEPT_TEXT) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if len(text) <= limit else text[:limit] + f"... (cut; {len(text)} characters in all)"


def _code(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def tail(text: str, lines: int, limit: int = KEPT_LOG_BYTES) -> str:
    """The last ``lines`` lines of ``text``, at most ``limit`` characters."""
    kept = "".join(text[-limit:].splitlines(keepends=True)[-lines:]) if lines > 0 else ""
    return kept


def root_cause(value: Any) -> Obj | None:
    """``status.rootCause`` (the replica that failed first), or the same in a kept summary."""
    if not isinstance(value, dict) or not value.get("replica"):
        return None
    return {"replica": _text(value.get("replica"), 253), "detail": _text(value.get("detail")),
            "exit_code": _code(value.get("exitCode")), "finished": _text(value.get("finishedAt"), 40),
            "permanent": bool(value.get("permanent"))}  # fmt: skip


def restart_history(value: Any) -> list[Obj]:
    """``status.restartHistory``: each replacement of a replica, its cause and whether it spent
    the restart budget (counted), oldest first."""
    rows = [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []
    return [{"time": _text(e.get("time"), 40), "replica": _text(e.get("replica"), 253), "cause": _text(e.get("cause")),
             "counted": bool(e.get("counted")), "exit_code": _code(e.get("exitCode"))}
            for e in rows[-HISTORY_ROWS:]]  # fmt: skip


def kept_log(data: Obj, pod: str) -> str | None:
    """A replica's kept log lines (None when the evidence has none for ``pod``)."""
    text = data.get(f"{pod}.log")
    return text[-KEPT_LOG_BYTES:] if isinstance(text, str) else None


def kept(data: Obj, live: set[str]) -> Obj | None:
    """What the controller kept before clean-up (the evidence ConfigMap's ``data``) of replicas
    that are gone (not in ``live``): phase, each container's exit code, reason and termination
    message, and the kept log lines; the job's Events as they were. None when nothing is gone."""
    summary = _json(data.get("summary.json"))
    summary = summary if isinstance(summary, dict) else {}
    reported: Obj = summary["replicas"] if isinstance(summary.get("replicas"), dict) else {}
    logged = {k[: -len(".log")] for k in data if k.endswith(".log")}
    names = sorted((set(reported) | logged) - live)[:KEPT_REPLICAS]
    if not names:
        return None
    replicas_out = []
    for name in names:
        rep: Obj = reported[name] if isinstance(reported.get(name), dict) else {}
        containers = [c for c in rep.get("containers") or [] if isinstance(c, dict)][:16]
        replicas_out.append({
            "pod": name, "phase": _text(rep.get("phase"), 40),
            "containers": [{"name": _text(c.get("name"), 253), "state": _text(c.get("state"), 40),
                            "exit_code": _code(c.get("exitCode")), "reason": _text(c.get("reason"), 200),
                            "message": _text(c.get("message")), "finished": _text(c.get("finishedAt"), 40)}
                           for c in containers],
            "log": kept_log(data, name),
        })  # fmt: skip
    raw_events = _json(data.get("events.json"))
    kept_events = [e for e in raw_events if isinstance(e, dict)][-KEPT_EVENTS:] if isinstance(raw_events, list) else []
    return {
        "kept_at": _text(summary.get("keptAt"), 40),
        "phase": _text(summary.get("phase"), 40),
        "root_cause": root_cause(summary.get("rootCause")),
        "replicas": replicas_out,
        "events": [
            {
                "type": _text(e.get("type"), 40),
                "reason": _text(e.get("reason"), 200),
                "message": _text(e.get("message")),
                "count": _code(e.get("count")) or 1,
                "time": _text(e.get("time"), 40),
            }
            for e in kept_events
        ],
    }


def events(items: list[Obj], uids: set[str]) -> list[Obj]:
    """Events of the objects with ``uids`` (the job and its pods), newest last, at most MAX_EVENTS.
    Matched by ``involvedObject.uid``, not by name: in a shared namespace another DAG's job or
    pod may carry a name that starts like ours."""
    out = []
    for ev in items:
        obj = ev.get("involvedObject") or {}
        if obj.get("uid") not in uids:
            continue
        name = str(obj.get("name") or "")
        when = ev.get("lastTimestamp") or ev.get("eventTime") or (ev.get("metadata") or {}).get("creationTimestamp")
        out.append({"type": ev.get("type"), "reason": ev.get("reason"), "object": f"{obj.get('kind')}/{name}",
                    "message": ev.get("message"), "count": ev.get("count") or 1, "time": when})  # fmt: skip
    out.sort(key=lambda e: e["time"] or "")
    return out[-MAX_EVENTS:]


def _num(value: Any) -> int | float | None:
    return (
        value
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")
        else None
    )


def _metrics(value: Any, limit: int) -> Obj:
    if not isinstance(value, dict):
        return {}
    out = {str(k)[:64]: v for k, v in value.items() if _num(v) is not None}
    return dict(list(out.items())[:limit])


def progress(status: Obj) -> Obj | None:
    """What the reporting replica printed last and the history for the chart (``status.progress``,
    docs/progress.md); numbers only, capped whatever the status holds. None without progress."""
    p = status.get("progress")
    if not isinstance(p, dict):
        return None
    out: Obj = {name: _num(p.get(key)) for key, name in (("step", "step"), ("totalSteps", "total_steps"), ("epoch", "epoch"),
                                                         ("totalEpochs", "total_epochs"), ("percent", "percent"),
                                                         ("etaSeconds", "eta_seconds"))}  # fmt: skip
    out.update({name: _text(p.get(key), 64) for key, name in (("summary", "summary"), ("eta", "eta"), ("replica", "replica"),
                                                              ("updated", "updated"),
                                                              ("reportedAt", "reported_at"))})  # fmt: skip
    out["metrics"] = _metrics(p.get("metrics"), PROGRESS_METRICS)
    points = ((p.get("history") or {}).get("points") if isinstance(p.get("history"), dict) else None) or []
    out["history"] = [{"time": _text(pt.get("time"), 40), "step": _num(pt.get("step")), "epoch": _num(pt.get("epoch")),
                       "metrics": _metrics(pt.get("metrics"), CHART_METRICS)}
                      for pt in points[-PROGRESS_POINTS:]
                      if isinstance(pt, dict) and isinstance(pt.get("time"), str) and _time(pt["time"])]  # fmt: skip
    return out


def detail(job: Obj, pods: list[Obj], event_items: list[Obj], now: datetime, evidence: Obj | None = None) -> Obj:
    """The task tab: the row, conditions over time, replicas and Events; the root cause and
    restart history from the job's status; ``kept``, what the controller kept of replicas
    clean-up deleted (``evidence``: the data of the job's own evidence ConfigMap); and the
    reported ``progress`` with its history."""
    status = job.get("status") or {}
    conds = sorted(status.get("conditions") or [], key=lambda c: c.get("lastTransitionTime") or "")
    return {
        **summary(job, now),
        "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message", "lastTransitionTime")} for c in conds],
        "started": status.get("startTime"),
        "completed": status.get("completionTime"),
        "replica_table": replicas(pods),
        "events": events(event_items, {str(o["metadata"].get("uid")) for o in [job, *pods] if o["metadata"].get("uid")}),
        "can_pause": job.get("kind") in PAUSABLE,
        "paused_by_task": bool(((job.get("metadata") or {}).get("annotations") or {}).get(PAUSED_BY)),
        "root_cause": root_cause(status.get("rootCause")),
        "restart_history": restart_history(status.get("restartHistory")),
        "kept": kept(evidence, {str(p["metadata"].get("name")) for p in pods}) if evidence else None,
        "progress": progress(status),
    }


def scale_error(job: Obj, replicas: Any) -> str | None:
    """Why ``expectedReplicas`` cannot be set to ``replicas`` (None when it can)."""
    spec = elastic(job)
    if spec is None:
        return (
            f"{job.get('kind')} {(job.get('metadata') or {}).get('name')} is not an Elastic job; "
            "only Elastic PyTorchTrainingJob and DeepSpeedJob scale"
        )
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        return f"replicas must be a whole number, not {replicas!r}"
    low = int(spec.get("minReplicas", 1))
    # Without maxReplicas the controller clamps to the declared replicas (kinds/training.py
    # bounds); the UI refuses what the controller would not run rather than accept it silently.
    high = int(spec.get("maxReplicas", max(_declared_replicas(job), low)))
    if replicas < low or replicas > high:
        return f"replicas must be between minReplicas {low} and maxReplicas {high}; got {replicas}"
    return None


def _declared_replicas(job: Obj) -> int:
    """The replicas the elastic job's one replica type declares (DeepSpeed: spec.worker)."""
    spec = job.get("spec") or {}
    declared = (spec.get("worker") or {}) if job.get("kind") == "DeepSpeedJob" else ((spec.get("replicaSpecs") or [{}])[0] or {})
    try:
        return int(declared.get("replicas", 1))
    except (TypeError, ValueError):
        return 1
