"""``cache=``: an unchanged job on unchanged inputs is not trained again (docs/retraining.md,
"Unchanged inputs are not retrained"). Pure.

The key of a run is the sha256 of what decides what the training produces:

- the rendered job as the spec digest sees it (``api/specdigest.py``: image references, command,
  args, env, resources, replicas... without what differs per try), and without what differs per
  DAG run while the training stays the same: this package's own labels and annotations (the run
  id) and the checkpoint mount's ``subPath`` (each run's own directory; the mount path stays);
- every container image as written; an image pinned by digest (``repo@sha256:...``) makes the
  key follow the image, a tag does not (a push under the same tag is the same key: ``mutable``
  names those images, for the task log);
- the input asset events: the DAG run's triggering events and the latest event of each of the
  task's inlets (uri, id or time, and where it came from);
- ``cache_version``, the author's string to invalidate (as Flyte's).

A successful run records its key with what it delivered (result, metrics, checkpoint and its
location, the job) as its XCom ``t9k_cache``; a later run of the same task and map index whose key
equals the latest such record delivers those instead of training.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from airflow_t9k.api.checkpoint import VOLUME_NAME
from airflow_t9k.api.podtemplates import template_holders
from airflow_t9k.api.specdigest import normalised

Obj = dict[str, Any]
XCOM_CACHE = "t9k_cache"
KEY_STATE = "t9k_cache_key"  # the key this try computed before it submitted, in the task state store
OURS = "airflow-t9k.io/"  # this package's labels and annotations
VERSION = "c1"  # of what the key covers: a record of another version never matches
DELIVERED = ("result", "metrics", "checkpoint", "checkpoint_location")


def images_of(job: Obj) -> list[str]:
    """Every container image of the job's pod templates (init containers too), sorted, once each."""
    found: set[str] = set()
    for _, holder in template_holders(job):
        spec = (holder.get("template") or {}).get("spec") if isinstance(holder.get("template"), dict) else None
        for group in ("initContainers", "containers"):
            for c in (spec or {}).get(group) or [] if isinstance(spec, dict) else []:
                if isinstance(c, dict) and isinstance(c.get("image"), str):
                    found.add(c["image"])
    launcher = (job.get("spec") or {}).get("launcher") if isinstance(job.get("spec"), dict) else None
    if isinstance(launcher, dict) and isinstance(launcher.get("image"), str):
        found.add(launcher["image"])
    return sorted(found)


def mutable(images: list[str]) -> list[str]:
    """The images named by tag, not pinned by digest."""
    return [i for i in images if "@sha256:" not in i]


def run_spec(job: Obj) -> Obj:
    """The job as the key sees it (the module's docstring)."""
    out = copy.deepcopy(normalised(job))
    meta = out.get("metadata") or {}
    for field in ("labels", "annotations"):
        kept = {k: v for k, v in (meta.get(field) or {}).items() if not str(k).startswith(OURS)}
        if kept:
            meta[field] = kept
        else:
            meta.pop(field, None)
    for _, holder in template_holders(out):
        spec = (holder.get("template") or {}).get("spec") if isinstance(holder.get("template"), dict) else None
        for c in ((spec or {}).get("containers") or []) if isinstance(spec, dict) else []:
            for m in c.get("volumeMounts") or [] if isinstance(c, dict) else []:
                if isinstance(m, dict) and m.get("name") == VOLUME_NAME:
                    m.pop("subPath", None)
    return out


def spec_key(job: Obj) -> str:
    """sha256 of ``run_spec(job)``."""
    return hashlib.sha256(json.dumps(run_spec(job), sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def key(spec: str, images: list[str], events: list[list[str]], version: str | None) -> str:
    """``c1:<sha256>`` of the run's inputs (the module's docstring)."""
    text = json.dumps({"spec": spec, "images": sorted(images), "events": sorted(events), "version": version or ""},
                      sort_keys=True, separators=(",", ":"))  # fmt: skip
    return f"{VERSION}:{hashlib.sha256(text.encode()).hexdigest()}"


def record(run_key: str, run_id: str, job: Obj, delivered: Obj) -> Obj:
    """What a successful run pushes as XCom ``t9k_cache``."""
    return {"key": run_key, "run_id": run_id, "job": {k: job.get(k) for k in ("kind", "name", "namespace", "uid")},
            **{k: delivered[k] for k in DELIVERED if delivered.get(k) is not None}}  # fmt: skip


def matching(value: Any, run_key: str) -> Obj | None:
    """The earlier record when its key is this run's, else None (no record, another key, another
    version of the key, or not a record of this shape)."""
    if not isinstance(value, dict) or not isinstance(value.get("key"), str) or value["key"] != run_key:
        return None
    if not isinstance(value.get("run_id"), str) or not isinstance(value.get("job"), dict):
        return None
    return value
