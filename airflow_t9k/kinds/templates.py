"""Job templates (``T9kJobTemplate``, ``ClusterT9kJobTemplate``): what one adds to a job. Pure.

A platform team writes once what a kind of training needs (image, volumes, tolerations, node
selector, env, resources, shared memory, service account) in a template; a job names it in
``spec.templateRef`` and gives only what differs. The controller merges the template into the
job once, before any pod exists, writes the merged spec and records the template it came from
(``ANNOTATION``); from then on the job is self-contained, so no later change to the template
reaches it (docs/templates.md).

The rules (``merge_pod``, ``merge_spec``), the job's value always winning:

- a mapping is merged key by key, recursively (labels, annotations, nodeSelector, resources'
  ``requests`` and ``limits`` per resource name, securityContext, affinity, ``runPolicy``...);
- a list the Pod API keys (``LIST_KEYS``: containers by name, env by name, volumes by name,
  volumeMounts by mountPath, ports by containerPort and protocol...) is merged by that key: the
  template's entries in their order, an entry of the job's replacing the template's of the same
  key (containers are merged recursively instead), the job's new ones after them;
- ``tolerations`` and ``envFrom`` are the template's followed by the job's (an identical one once);
- any other value (scalars, other lists such as ``command`` or ``args``) is the job's when it
  has one, else the template's.

For each pod template of the job (``api.podtemplates``): the template's ``spec.template``, then
its ``spec.replicaTemplates[<replica type>]``, then the job's own. The rest of the job's spec
is merged over the template's ``spec.jobSpec`` (mappings by key, anything else the job's).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from airflow_t9k.api.podtemplates import template_holders
from airflow_t9k.kinds.base import LABEL_PREFIX

Obj = dict[str, Any]

NAMESPACED = "T9kJobTemplate"
CLUSTER = "ClusterT9kJobTemplate"
TEMPLATE_KINDS = (NAMESPACED, CLUSTER)
# The record of the resolved template on the job (JSON: kind, name, namespace, uid,
# resourceVersion, and the deprecation message when it was deprecated), for people reading it.
ANNOTATION = f"{LABEL_PREFIX}/template"
# The same record in the job's status (a mapping), written by the controller right after the
# merged spec: what says "resolved". Whoever creates a job can set any annotation (and so claim a
# merge that never happened); only the controller writes status.
STATUS_KEY = "template"
# Kinds with one pod template: a template's replicaTemplates would have nothing to choose.
SINGLE_TEMPLATE_KINDS = ("MPIJob", "DeepSpeedJob", "ColossalAIJob", "BeamJob")

# Lists the Pod API keys (its x-kubernetes-list-map-keys), by field name; protocol defaults to TCP.
LIST_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "imagePullSecrets": ("name",),
    "hostAliases": ("ip",),
    "resourceClaims": ("name",),
    "readinessGates": ("conditionType",),
    "schedulingGates": ("name",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
    "env": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "ports": ("containerPort", "protocol"),
    "resizePolicy": ("resourceName",),
}
MERGED_ENTRIES = ("containers", "initContainers", "ephemeralContainers")  # the job's entry merged into the template's
APPENDED = ("tolerations", "envFrom")


class TemplateError(Exception):
    """The template cannot make this job whole; the message says why."""


# -- the rules --------------------------------------------------------------------------------


def merge_pod(base: Any, over: Any) -> Any:
    """A pod template (or any part of one): ``over``'s values win, Pod API lists merge by key."""
    return _merge(base, over, keyed=True)


def merge_spec(base: Any, over: Any) -> Any:
    """A job's spec over a template's ``jobSpec``: mappings by key, anything else ``over``'s."""
    return _merge(base, over, keyed=False)


def _merge(base: Any, over: Any, keyed: bool) -> Any:
    if over is None:
        return copy.deepcopy(base)
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return copy.deepcopy(over)
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = _field(key, base[key], value, keyed) if key in base else copy.deepcopy(value)
    return out


def _field(name: str, base: Any, over: Any, keyed: bool) -> Any:
    if keyed and isinstance(base, list) and isinstance(over, list):
        if name in LIST_KEYS:
            return _by_key(base, over, LIST_KEYS[name], merge_entries=name in MERGED_ENTRIES)
        if name in APPENDED:
            return copy.deepcopy(base) + [copy.deepcopy(o) for o in over if o not in base]
    return _merge(base, over, keyed)


def _key(item: Any, keys: tuple[str, ...]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    return tuple(item.get(k, "TCP" if k == "protocol" else None) for k in keys)


def _by_key(base: list[Any], over: list[Any], keys: tuple[str, ...], merge_entries: bool) -> list[Any]:
    out = copy.deepcopy(base)
    where = {k: i for i, item in enumerate(out) if (k := _key(item, keys)) is not None}
    for item in over:
        k = _key(item, keys)
        if k is not None and k in where:
            i = where[k]
            out[i] = merge_pod(out[i], item) if merge_entries else copy.deepcopy(item)
        else:
            out.append(copy.deepcopy(item))
    return out


# -- a job and its template --------------------------------------------------------------------


def template_ref(job: Obj) -> Obj | None:
    ref = (job.get("spec") or {}).get("templateRef")
    return ref if isinstance(ref, dict) else None


def merged_record(job: Obj) -> Obj | None:
    """The record of the template the controller merged into the job, from its status; None when
    it merged none. A job planned before the record moved to status carries it only in the
    annotation: that is believed only where a controller's status already says so
    (``TemplateResolved=True``), never from the annotation alone."""
    status = job.get("status") or {}
    rec = status.get(STATUS_KEY)
    if isinstance(rec, dict):
        return rec
    said = any(isinstance(c, dict) and c.get("type") == "TemplateResolved" and c.get("status") == "True"
               for c in status.get("conditions") or [])  # fmt: skip
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not said or raw is None:
        return None
    try:
        legacy = json.loads(raw)
    except ValueError:
        return None
    return legacy if isinstance(legacy, dict) else None


def unresolved(job: Obj) -> bool:
    """Whether the job names a template the controller has not merged into it yet."""
    return template_ref(job) is not None and merged_record(job) is None


def wanted(job: Obj) -> tuple[str, str, str] | None:
    """(template kind, namespace ("" for a cluster template), name) of the job's template."""
    ref = template_ref(job)
    if ref is None:
        return None
    kind = ref.get("kind") or NAMESPACED
    return str(kind), (job["metadata"].get("namespace") or "") if kind == NAMESPACED else "", str(ref.get("name"))


def describe(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def deprecation(template: Obj) -> str | None:
    """The deprecation message of a deprecated template, None for one in good standing."""
    spec = template.get("spec") or {}
    if not spec.get("deprecated"):
        return None
    return str(spec.get("deprecationMessage") or "no replacement named")


def record_of(template: Obj) -> Obj:
    """Which template, at which resourceVersion (status.template, and the annotation as JSON)."""
    meta = template.get("metadata") or {}
    out = {"kind": template.get("kind"), "name": meta.get("name")}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    out.update(uid=meta.get("uid"), resourceVersion=meta.get("resourceVersion"))
    if (message := deprecation(template)) is not None:
        out["deprecated"] = message
    return out


def record(template: Obj) -> str:
    """The annotation's value."""
    return json.dumps(record_of(template), separators=(",", ":"))


def allowed_in(template: Obj, namespace: str) -> bool:
    """Whether a job in ``namespace`` may use ``template``: a ClusterT9kJobTemplate's
    ``spec.allowedNamespaces``, when given, names the namespaces that may; a namespaced
    template serves its own namespace only (the job names it there)."""
    if template.get("kind") != CLUSTER:
        return True
    allowed = (template.get("spec") or {}).get("allowedNamespaces")
    return allowed is None or (isinstance(allowed, list) and namespace in allowed)


def apply_template(job: Obj, template: Obj) -> Obj:
    """The job with ``template`` merged in and the record annotation set (a new object).

    TemplateError when the template is for another kind, or the merged job still has a pod
    template without containers or a container without an image (neither gave one).
    """
    meta = template.get("metadata") or {}
    name = describe(str(template.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
    tspec = template.get("spec") or {}
    if tspec.get("jobKind") != job.get("kind"):
        raise TemplateError(f"{name} is for {tspec.get('jobKind')}, not {job.get('kind')}")
    merged = copy.deepcopy(job)
    merged["spec"] = merge_spec(tspec.get("jobSpec") or {}, job.get("spec") or {})
    per_type = tspec.get("replicaTemplates") or {}
    for rtype, holder in template_holders(merged, create=True):
        base = merge_pod(tspec.get("template") or {}, per_type.get(rtype))
        holder["template"] = merge_pod(base, holder.get("template"))
        _check_whole(holder["template"], rtype, name)
    annotations = merged["metadata"].setdefault("annotations", {})
    annotations[ANNOTATION] = record(template)
    return merged


def _check_whole(pod: Any, rtype: str, name: str) -> None:
    spec = pod.get("spec") if isinstance(pod, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not containers or not isinstance(spec, dict):
        raise TemplateError(f"replica type {rtype} has no container: neither the job nor {name} gives one")
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            if isinstance(c, dict) and not c.get("image"):
                raise TemplateError(f"container {c.get('name')!r} of replica type {rtype} has no image: "
                                    f"neither the job nor {name} gives one "
                                    "(a template's container applies to the job's of the same name)")  # fmt: skip
