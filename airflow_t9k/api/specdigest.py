"""What a job is, apart from which try submitted it: the digest a Clear compares (docs/airflow.md,
"Re-runs"). Pure.

The operator records ``digest(job)`` of the job it renders as the annotation ``SPEC_DIGEST`` when
it submits it. A try of a later series (a Clear) takes a recorded job that still runs only when
the job it renders now has the same digest: a DAG author who fixed the image and cleared gets a
job with the new image, not the old one back.

The digest leaves out everything that differs between tries or series of one task instance
while the job the author asked for stays the same:

- the name (``<name>-t<try>`` for a run anew) and the server's fields (uid, resourceVersion...);
- the labels and annotations this package writes per try (``try-number``, the submission's
  nonce, the ``consumed-by-try``, ``delivered-by-try`` and ``paused-by`` marks, the digest itself,
  the try's ``deadline`` and ``deadline-source``);
- the per-try environment: ``T9K_ATTEMPT``, ``T9K_RERUN`` (and ``T9K_RESTART_COUNT``, which the
  controller adds to pods), and the OpenLineage parent run (``OPENLINEAGE_PARENT_*`` and
  ``OPENLINEAGE_ROOT_PARENT_*``, which name the try's run);
- the per-try and per-series part of the checkpoint directory (``try-<n>``, ``series-<n>``,
  ``spec-<digest>`` at the end of the checkpoint mount's ``subPath``); the volume, the directory
  the author named and the mount path stay in.

Everything else the author sets (image, command, args, replicas, env, resources, volumes, the
rest of the spec, the author's labels and annotations, the namespace) is in it; so, for a mapped
task, is what that map index's element rendered. A value the author templates per try (``{{
ti.try_number }}``) makes every series' job a different one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from airflow_t9k.api.checkpoint import ENV_ATTEMPT, ENV_RERUN, ENV_RESTARTS, VOLUME_NAME
from airflow_t9k.api.overrun import DEADLINE, DEADLINE_SOURCE
from airflow_t9k.api.podtemplates import template_holders
from airflow_t9k.api.rerun import CONSUMED_BY, DELIVERED_BY, SUBMISSION, TRY_LABEL
from airflow_t9k.api.runmode import PAUSED_BY

Obj = dict[str, Any]

SPEC_DIGEST = "airflow-t9k.io/spec-digest"
VERSION = "v1"  # of what the digest covers: a digest of another version is not compared (taken as matching)
PER_TRY_LABELS = frozenset({TRY_LABEL})
PER_TRY_ANNOTATIONS = frozenset({TRY_LABEL, SUBMISSION, CONSUMED_BY, DELIVERED_BY, PAUSED_BY, SPEC_DIGEST, DEADLINE,
                                 DEADLINE_SOURCE})  # fmt: skip
PER_TRY_ENV = frozenset({ENV_ATTEMPT, ENV_RERUN, ENV_RESTARTS})
PER_TRY_ENV_PREFIXES = ("OPENLINEAGE_PARENT_", "OPENLINEAGE_ROOT_PARENT_")  # operators/lineage_parent.py's NAMES
_SCOPED_DIR = re.compile(r"(^|/)(try-\d+|series-\d+|spec-[0-9a-f]+)$")


def _per_try_env(name: Any) -> bool:
    return isinstance(name, str) and (name in PER_TRY_ENV or name.startswith(PER_TRY_ENV_PREFIXES))


def unscoped(sub_path: str) -> str:
    """A checkpoint ``subPath`` without its per-try, per-series or per-configuration end."""
    return _SCOPED_DIR.sub("", sub_path)


def _clean_containers(spec: Obj) -> None:
    for key in ("initContainers", "containers"):
        group = spec.get(key)
        if not isinstance(group, list):
            continue
        for c in group:
            if not isinstance(c, dict):
                continue
            if isinstance(c.get("env"), list):
                c["env"] = [e for e in c["env"] if not (isinstance(e, dict) and _per_try_env(e.get("name")))]
                if not c["env"]:
                    del c["env"]
            mounts = c.get("volumeMounts")
            for m in mounts if isinstance(mounts, list) else []:
                if isinstance(m, dict) and m.get("name") == VOLUME_NAME and isinstance(m.get("subPath"), str):
                    m["subPath"] = unscoped(m["subPath"])


def normalised(job: Obj) -> Obj:
    """``job`` without what differs between tries of the same job (the module's docstring)."""
    out = copy.deepcopy({k: v for k, v in job.items() if k not in ("metadata", "status")})
    meta = job.get("metadata") or {}
    kept: Obj = {}
    if meta.get("namespace"):
        kept["namespace"] = meta["namespace"]
    for key, per_try in (("labels", PER_TRY_LABELS), ("annotations", PER_TRY_ANNOTATIONS)):
        given = meta.get(key)
        if isinstance(given, dict):
            values = {k: v for k, v in given.items() if k not in per_try}
            if values:
                kept[key] = values
    out["metadata"] = kept
    for _, holder in template_holders(out):
        template = holder.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            _clean_containers(template["spec"])
    launcher = (out.get("spec") or {}).get("launcher")  # a ColossalAI launcher gets the lineage env too
    if isinstance(launcher, dict):
        _clean_containers({"containers": [launcher]})
    return out


def digest(job: Obj) -> str:
    """``v1:<sha256>`` of the normalised job (canonical JSON: sorted keys)."""
    text = json.dumps(normalised(job), sort_keys=True, separators=(",", ":"), default=str)
    return f"{VERSION}:{hashlib.sha256(text.encode()).hexdigest()}"


def recorded(job: Obj) -> str | None:
    """The digest the job was submitted with, None when it has none (an older version submitted it)."""
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(SPEC_DIGEST)
    return value if isinstance(value, str) and value else None


def comparable(value: str) -> bool:
    """A digest of what this version covers (another version's is not compared)."""
    return value.startswith(f"{VERSION}:")


# -- what changed, for the task log -------------------------------------------------------------
def _shown(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _containers(template: Any) -> dict[str, Obj]:
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict):
        return {}
    found: dict[str, Obj] = {}
    for key in ("initContainers", "containers"):
        group = spec.get(key)
        for i, c in enumerate(group if isinstance(group, list) else []):
            if isinstance(c, dict):
                found[str(c.get("name") or f"{key}[{i}]")] = c
    return found


def _env(container: Obj) -> dict[str, Any]:
    env = container.get("env")
    return (
        {str(e.get("name")): e.get("value", e.get("valueFrom")) for e in env if isinstance(e, dict)}
        if isinstance(env, list)
        else {}
    )


def changes(old: Obj, new: Obj, limit: int = 8) -> list[str]:
    """What differs between two jobs, compactly, the fields a DAG author edits first (image,
    command, args, env, replicas, resources per replica type and container), then the rest of
    the spec by its top-level keys and the metadata. Both are normalised first; ``old`` may be
    the job as the API server keeps it, whose defaults may show as differences of their own."""
    a, b = normalised(old), normalised(new)
    out: list[str] = []
    holders_a, holders_b = dict(template_holders(a)), dict(template_holders(b))
    for rtype in [*holders_a, *(t for t in holders_b if t not in holders_a)]:
        ha, hb = holders_a.get(rtype), holders_b.get(rtype)
        if ha is None or hb is None:
            out.append(f"replica type {rtype} {'added' if ha is None else 'removed'}")
            continue
        if ha.get("replicas") != hb.get("replicas"):
            out.append(f"replicas of {rtype}: {ha.get('replicas')} -> {hb.get('replicas')}")
        other = sorted(k for k in {*ha, *hb} if k not in ("template", "replicas") and ha.get(k) != hb.get(k))
        if other:
            out.append(f"{', '.join(other)} of {rtype}")
        ca, cb = _containers(ha.get("template")), _containers(hb.get("template"))
        for name in [*ca, *(n for n in cb if n not in ca)]:
            x, y = ca.get(name), cb.get(name)
            where = f"{rtype}/{name}"
            if x is None or y is None:
                out.append(f"container {where} {'added' if x is None else 'removed'}")
                continue
            if x.get("image") != y.get("image"):
                out.append(f"image of {where}: {_shown(x.get('image'))} -> {_shown(y.get('image'))}")
            out.extend(f"{field} of {where}: {_shown(x.get(field))} -> {_shown(y.get(field))}"
                       for field in ("command", "args", "resources") if x.get(field) != y.get(field))  # fmt: skip
            ea, eb = _env(x), _env(y)
            names = sorted(n for n in {*ea, *eb} if ea.get(n) != eb.get(n))
            if names:
                out.append(f"env of {where}: {', '.join(names)}")
            rest = {k for k in {*x, *y} if k not in ("image", "command", "args", "resources", "env") and x.get(k) != y.get(k)}
            if rest:
                out.append(f"{', '.join(sorted(rest))} of {where}")
        ta, tb = _mapping(ha.get("template")), _mapping(hb.get("template"))
        sa, sb = _mapping(ta.get("spec")), _mapping(tb.get("spec"))
        pod = sorted(k for k in {*sa, *sb} if k not in ("containers", "initContainers") and sa.get(k) != sb.get(k))
        if ta.get("metadata") != tb.get("metadata"):
            pod.insert(0, "metadata")
        if pod:
            out.append(f"pod {', '.join(pod)} of {rtype}")
    spec_a, spec_b = a.get("spec") or {}, b.get("spec") or {}
    holders = {"replicaSpecs", "worker", "jobTemplate"}
    if isinstance(spec_a, dict) and isinstance(spec_b, dict):
        top = sorted(k for k in {*spec_a, *spec_b} if k not in holders and spec_a.get(k) != spec_b.get(k))
        out += [f"spec.{k}" for k in top]
    for key in ("kind", "apiVersion"):
        if a.get(key) != b.get(key):
            out.append(f"{key}: {a.get(key)} -> {b.get(key)}")
    meta_a, meta_b = a.get("metadata") or {}, b.get("metadata") or {}
    out += [f"metadata.{k}" for k in sorted({*meta_a, *meta_b}) if meta_a.get(k) != meta_b.get(k)]
    if not out:
        return ["fields the comparison does not name (e.g. the order of replica types)"]
    return out if len(out) <= limit else [*out[:limit], f"{len(out) - limit} more"]
