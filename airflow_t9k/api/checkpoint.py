"""Checkpoints: where a job's replicas keep them, and what tells a program where it is.

Pure: no cluster, no Airflow. The operator applies it to the manifest it submits; the
controller adds ``T9K_RESTART_COUNT`` to every pod it builds (controller/reconcile/desired.py).

- ``checkpoint=`` names a volume (a PersistentVolumeClaim, or any writable volume source) and
  a directory in it. Every container of every replica mounts this task's own directory of it
  at ``T9K_CHECKPOINT_DIR`` (default ``/t9k/checkpoint``).
- This task's directory is ``<path>/<dag_id>/<run_id>/<task_id>[/iter-<n>][/map-<i>]``, derived
  from what a replica restart, a task retry and a Clear keep (the DAG run, the task, the Task Loop
  iteration, the map index); a new DAG run, another task, another iteration of a loop or another
  map index starts in an empty directory. Each part is kept
  readable: characters other than ``A-Za-z0-9._-`` become ``_`` and such a part gets a short
  digest of the original, so two run ids that differ only there never share a directory.
- ``checkpoint_scope`` (``scope_dir``) picks a directory inside it: ``"series"`` (the default)
  the task's directory itself for the first series of tries and ``series-<first try>`` for the
  series each Clear starts, so retries resume and a Clear starts empty; ``"try"`` ``try-<n>``
  for every try that submits a job; ``"run"`` the task's directory for every try and Clear,
  except that a Clear whose job differs from the one before it (``api/specdigest.py``) gets
  ``spec-<digest>``, so a sweep's map index never resumes another configuration's checkpoints.
- The job a try reattaches to keeps the directory it was submitted with: ``location_in`` reads
  it from the job's own mount, and that is the location the task reports.
- ``T9K_ATTEMPT`` is the Airflow try number that submitted the job; ``T9K_RESTART_COUNT`` the
  replica's restarts within it. A program that writes ``{"checkpoint": ...}`` in its result
  (the deciding replica's termination message) has that value pushed as XCom ``checkpoint``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from airflow_t9k.api.podtemplates import pod_templates, template_holders

Obj = dict[str, Any]

VOLUME_NAME = "airflow-t9k-checkpoint"
DEFAULT_MOUNT_PATH = "/t9k/checkpoint"
ENV_DIR = "T9K_CHECKPOINT_DIR"
ENV_ATTEMPT = "T9K_ATTEMPT"
ENV_RESTARTS = "T9K_RESTART_COUNT"
ENV_RERUN = "T9K_RERUN"  # 0 for the task's first job in its DAG run, n for the n-th run anew beside earlier ones
SCOPES = ("series", "run", "try")  # checkpoint_scope (docs/checkpoints.md)
DEFAULT_SCOPE = "series"
RESULT_KEY = "checkpoint"
KEYS = ("claim", "volume", "path", "mount_path")
# A checkpoint must outlive the pod and be writable: these sources are neither.
REFUSED_SOURCES = {
    "emptyDir": "an emptyDir is deleted with its pod, so a replaced replica would find nothing",
    "configMap": "a configMap volume is read-only",
    "secret": "a secret volume is read-only",
    "downwardAPI": "a downwardAPI volume is read-only",
    "projected": "a projected volume is read-only",
}
_CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
PART_LIMIT = 80  # a path component stays far below the 255 bytes a file system allows


@dataclass(frozen=True)
class Checkpoint:
    """A volume source, the directory in it under which each task gets its own, and where
    containers see this task's directory."""

    volume: Obj
    path: str = ""
    mount_path: str = DEFAULT_MOUNT_PATH


def parse(value: Any) -> Checkpoint:
    """``"claim"`` / ``"claim/dir"``, ``{"claim": ..., "path": ...}``, or ``{"volume": <source>,
    "path": ...}``; ``mount_path`` in a dict. ValueError says what is wrong and how to write it."""
    if isinstance(value, str):
        claim, _, path = value.strip().partition("/")
        return parse({"claim": claim, "path": path})
    if not isinstance(value, dict):
        raise ValueError(f"checkpoint must be a claim name ('ckpt' or 'ckpt/dir') or a dict with 'claim' or 'volume', "
                         f"got {type(value).__name__}")  # fmt: skip
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise ValueError(f"checkpoint has unknown keys {unknown}; it takes {', '.join(KEYS)}")
    if ("claim" in value) == ("volume" in value):
        raise ValueError("checkpoint needs exactly one of 'claim' (a PersistentVolumeClaim name) and 'volume' (a volume source)")
    if "claim" in value:
        claim = value["claim"]
        if not isinstance(claim, str) or len(claim) > 253 or not _CLAIM.match(claim):
            raise ValueError(f"checkpoint claim must be a PersistentVolumeClaim name (lower-case DNS subdomain), got {claim!r}")
        volume: Obj = {"persistentVolumeClaim": {"claimName": claim}}
    else:
        volume = _source(value["volume"])
    return Checkpoint(volume, _relative(value.get("path") or ""), _mount_path(value.get("mount_path", DEFAULT_MOUNT_PATH)))


def warning(checkpoint: Checkpoint) -> str | None:
    """What the task log says about a volume that gets around the job's isolation (None: nothing)."""
    host = checkpoint.volume.get("hostPath")
    if host is None:
        return None
    path = host.get("path") if isinstance(host, dict) else None
    return (f"checkpoint volume hostPath {path!r} mounts a directory of whichever node each replica runs on, read-write: "
            "it is not isolated by namespace (every job on that node naming the same path shares the files, another "
            "team's included, and the node's own files are reachable), a replica moved to another node finds nothing, "
            "and the shipped admission policy and Pod Security baseline refuse it. Use a PersistentVolumeClaim "
            "(docs/checkpoints.md).")  # fmt: skip


def _source(raw: Any) -> Obj:
    if not isinstance(raw, dict):
        raise ValueError(
            f"checkpoint volume must be a volume source such as {{'nfs': {{'server': ..., 'path': ...}}}}, got {raw!r}"
        )
    source = {k: v for k, v in raw.items() if k != "name"}  # a whole Volume (V1Volume) works too: the name is ours
    if len(source) != 1:
        raise ValueError(f"checkpoint volume must have exactly one volume source (e.g. 'persistentVolumeClaim', 'nfs', "
                         f"'hostPath'), got {sorted(source) or 'none'}")  # fmt: skip
    kind, spec = next(iter(source.items()))
    if kind in REFUSED_SOURCES:
        raise ValueError(
            f"checkpoint volume cannot be {kind}: {REFUSED_SOURCES[kind]}; use a PersistentVolumeClaim or another lasting volume"
        )
    if not isinstance(spec, dict):
        raise ValueError(f"checkpoint volume {kind} must be a mapping, got {spec!r}")
    return {kind: dict(spec)}


def _relative(path: Any) -> str:
    if not isinstance(path, str):
        raise ValueError(f"checkpoint path must be a string, got {path!r}")
    if path.startswith("/"):
        raise ValueError(f"checkpoint path is a directory inside the volume, relative to its root; got the absolute {path!r}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"checkpoint path may not leave the volume ('..'), got {path!r}")
    return "/".join(parts)


def _mount_path(path: Any) -> str:
    if not isinstance(path, str) or not path.startswith("/") or path.rstrip("/") == "" or ".." in path.split("/"):
        raise ValueError(f"checkpoint mount_path must be an absolute path other than '/', got {path!r}")
    return path.rstrip("/")


def _part(text: str) -> str:
    safe = _SAFE.sub("_", text)[:PART_LIMIT]
    if safe != text or safe in ("", ".", ".."):
        safe = f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return safe


def task_dir(dag_id: str, run_id: str, task_id: str, map_index: int = -1, iteration: int | None = None) -> str:
    """This task's directory, relative to ``Checkpoint.path``: never the try number. A Task Loop's
    iteration (Airflow 3.4) is a new training, in ``iter-<n>`` (before the map index: the loop
    holds the expansion); outside a loop the directory is the one it always was."""
    parts = [_part(dag_id), _part(run_id), _part(task_id)]
    if iteration is not None:
        parts.append(f"iter-{int(iteration)}")
    if map_index is not None and map_index >= 0:
        parts.append(f"map-{map_index}")
    return "/".join(parts)


def sub_path(checkpoint: Checkpoint, dag_id: str, run_id: str, task_id: str, map_index: int = -1,
             try_number: int | None = None, own: str = "", iteration: int | None = None) -> str:  # fmt: skip
    """The directory in the volume that containers mount (the volume mount's ``subPath``); with
    ``try_number`` that try's own directory inside the task's, with ``own`` (``scope_dir``) that
    directory."""
    if try_number is not None:
        own = f"try-{int(try_number)}"
    return "/".join(p for p in (checkpoint.path, task_dir(dag_id, run_id, task_id, map_index, iteration), own) if p)


def scope_dir(scope: str, try_number: int, series_start: int) -> str:
    """The directory inside the task's that a job submitted by ``try_number``, of the series that
    started at ``series_start``, mounts ('' for the task's own): ``checkpoint_scope``'s choice."""
    if scope == "try":
        return f"try-{int(try_number)}"
    if scope == "series" and series_start > 1:  # the first series keeps the task's own, as "run" always did
        return f"series-{int(series_start)}"
    return ""


def config_dir(base: str, spec_digest: str) -> str:
    """``checkpoint_scope="run"``: the directory of a job whose spec differs from the job this
    task ran before it in its DAG run (a Clear after the DAG changed, a sweep's element that
    changed), keyed by the job's spec digest: never the other configuration's checkpoints."""
    return f"{base}/spec-{spec_digest.partition(':')[2][:12] or spec_digest[:12]}"


def _set_env(container: Obj, name: str, value: str) -> None:
    env = container.get("env") or []
    if isinstance(env, list):  # else malformed: left for the API server to refuse, naming the field
        container["env"] = [e for e in env if not (isinstance(e, dict) and e.get("name") == name)] + [
            {"name": name, "value": value}
        ]


def _containers(spec: Obj) -> list[Obj]:
    """Init and main containers; what is not a list of mappings is left as it is for the API
    server, whose message names the field (docs/airflow.md, pod templates)."""
    found = [spec.get(k) for k in ("initContainers", "containers")]
    return [c for group in found if isinstance(group, list) for c in group if isinstance(c, dict)]


def _templates(job: Obj) -> list[Obj]:
    if isinstance((job.get("spec") or {}).get("templateRef"), dict):
        # A job template supplies what the job leaves out: replicas without a template get one to
        # hold what is added here, and the controller merges the template under it.
        templates = [h.setdefault("template", {}) for _, h in template_holders(job, create=True)]
        return [t for t in templates if isinstance(t, dict)]
    return pod_templates(job)


def set_env(job: Obj, name: str, value: str) -> None:
    """``name=value`` in every container of every pod template of ``job`` (in place)."""
    for template in _templates(job):
        spec = template.setdefault("spec", {})
        if isinstance(spec, dict):
            for c in _containers(spec):
                _set_env(c, name, value)


def apply(job: Obj, *, attempt: int | None, checkpoint: Checkpoint | None = None, directory: str | None = None,
          grace_seconds: int | None = None) -> None:  # fmt: skip
    """Add the checkpoint mount and ``T9K_CHECKPOINT_DIR``, ``T9K_ATTEMPT`` and the termination
    grace period to every container of every pod template of ``job``, in place. ``directory``
    is the mount's ``subPath`` (``sub_path``). ValueError when something asked for cannot be
    done (no pod template, a mount path already taken)."""
    templated = isinstance((job.get("spec") or {}).get("templateRef"), dict)
    templates = _templates(job)
    if not templates and (checkpoint is not None or grace_seconds is not None):
        raise ValueError(f"checkpoint= and termination_grace_period= found no pod template in this {job.get('kind')}'s spec")
    for template in templates:
        spec = template.setdefault("spec", {})
        if not isinstance(spec, dict):
            continue
        if checkpoint is not None and templated and not spec.get("containers"):  # the template's would go unmounted
            raise ValueError("checkpoint= mounts into the job's containers, and a replica of this job leaves its "
                             "containers to its job template: name them in the job (e.g. {'name': 'main'})")  # fmt: skip
        if grace_seconds is not None:
            spec["terminationGracePeriodSeconds"] = grace_seconds
        if checkpoint is not None:
            volumes = spec.get("volumes") or []
            if isinstance(volumes, list) and any(isinstance(v, dict) and v.get("name") == VOLUME_NAME for v in volumes):
                raise ValueError(f"the pod template already has a volume named {VOLUME_NAME}, which checkpoint= adds")
            spec["volumes"] = [*volumes, {"name": VOLUME_NAME, **checkpoint.volume}] if isinstance(volumes, list) else volumes
        for c in _containers(spec):
            if attempt is not None:
                _set_env(c, ENV_ATTEMPT, str(attempt))
            if checkpoint is None:
                continue
            given = c.get("volumeMounts") or []
            if not isinstance(given, list):
                continue
            taken = [m for m in given if isinstance(m, dict) and str(m.get("mountPath", "")).rstrip("/") == checkpoint.mount_path]
            if taken:
                raise ValueError(f"container {c.get('name')!r} already mounts {taken[0].get('name')!r} at "
                                 f"{checkpoint.mount_path}; "
                                 "give checkpoint a different mount_path")  # fmt: skip
            mount: Obj = {"name": VOLUME_NAME, "mountPath": checkpoint.mount_path}
            if directory:
                mount["subPath"] = directory
            c["volumeMounts"] = [*given, mount]
            _set_env(c, ENV_DIR, checkpoint.mount_path)


def set_sub_path(job: Obj, directory: str) -> None:
    """Point every checkpoint mount of ``job`` at ``directory`` (in place)."""
    for template in _templates(job):
        spec = template.get("spec")
        for c in _containers(spec) if isinstance(spec, dict) else []:
            mounts = c.get("volumeMounts")
            for m in mounts if isinstance(mounts, list) else []:
                if isinstance(m, dict) and m.get("name") == VOLUME_NAME:
                    m["subPath"] = directory


def _ours(items: Any) -> Obj | None:
    """The checkpoint's volume (or mount) among ``items``, None when there is none."""
    found = [i for i in items if isinstance(i, dict) and i.get("name") == VOLUME_NAME] if isinstance(items, list) else []
    return found[0] if found else None


def location_in(job: Obj | None) -> Obj | None:
    """Where ``job``'s replicas keep their checkpoints, read from the job itself (the volume of
    ``VOLUME_NAME`` and its mount's ``subPath`` and path), as ``location`` gives it; None for a job
    that mounts none. The job a try reattaches to keeps what it was submitted with."""
    for template in pod_templates(job or {}):
        spec = template.get("spec")
        if not isinstance(spec, dict) or (volume := _ours(spec.get("volumes"))) is None:
            continue
        for c in _containers(spec):
            if (mount := _ours(c.get("volumeMounts"))) is not None:
                source = {k: v for k, v in volume.items() if k != "name"}
                return {"volume": source, "sub_path": mount.get("subPath") or "", "mount_path": mount.get("mountPath")}
    return None


def reported(result: Any) -> Any:
    """The checkpoint a program reported in its result (``{"checkpoint": ...}``), or None."""
    if isinstance(result, dict):
        return result.get(RESULT_KEY)
    return None


def location(checkpoint: Checkpoint, directory: str) -> Obj:
    """Where this task's checkpoints are, for the task log and XCom ``checkpoint_location``."""
    return {"volume": checkpoint.volume, "sub_path": directory, "mount_path": checkpoint.mount_path}
