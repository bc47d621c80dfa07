"""What the controller's cache keeps of each object, and request bodies it sends as they are.

The cache holds every pod, Service, ConfigMap, Secret, batch Job and Workload of every job:
about 17 KB of Python objects each at 1,000 jobs (docs/benchmarks.md), most of it fields
nothing here reads. ``slim_for(kind)`` is what an informer applies to each object before
caching it (list items, watch events, and what the executor stores from API responses).

What is kept, per kind, follows from what reads the cache: the pure core (``plan`` and the
kinds' hooks), the runner (``_on_child``, ``observed``) and the executor (``_job_gone``,
``_delete``, status PUTs). Whatever is kept, ``metadata`` stays whole but for
``managedFields``: name, namespace, uid and resourceVersion key the cache and every delete;
labels scope clean-up; annotations carry the restart count and DeepSpeed's hostfile
digest; ownerReferences tie a child to its job; deletionTimestamp marks it going.

Leaving ``managedFields`` out of a later PUT is safe: the API server keeps an object's
managedFields when an update omits them.

Separately, ``kubernetes_asyncio`` walks every request body recursively before it
``json.dumps`` it (``sanitize_for_serialization``), to turn its generated models into dicts.
The controller only sends plain JSON dicts, for which that walk returns an equal copy: a
quarter of the controller's CPU at 10 jobs went there. Dicts and lists now go to
``json.dumps`` as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_t9k.controller.reconcile.push import CA_ANNOTATION, URL_ANNOTATION

Obj = dict[str, Any]
Transform = Callable[[Obj], Obj]


def drop_managed_fields(obj: Obj) -> Obj:
    """The object without metadata.managedFields (changed in place, and returned)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _keeper(top: tuple[str, ...] = (), spec: tuple[str, ...] = ()) -> Transform:
    """A transform keeping apiVersion, kind, metadata (minus managedFields), the ``top`` keys,
    and of ``spec`` only the ``spec`` keys (no ``spec`` at all when none is wanted)."""
    keep = ("apiVersion", "kind", "metadata", *top)

    def slim(obj: Obj) -> Obj:
        out = {k: obj[k] for k in keep if k in obj}
        if spec and isinstance(obj.get("spec"), dict):
            out["spec"] = {k: obj["spec"][k] for k in spec if k in obj["spec"]}
        return drop_managed_fields(out)

    return slim


# ConfigMaps whose data the core reads: the hostfiles and rank tables it compares with what it
# wants (a rescale patches them). Their names, as the kinds make them (kinds/ssh_launch.py,
# kinds/deepspeed.py, kinds/ascend_ranktable.py). Any other ConfigMap is cached without its
# data: the evidence ConfigMap (up to 1 MiB, never read back by the controller; only its
# existence counts), and anything else carrying our label.
DATA_SUFFIXES = ("-hostfile", "-deepspeed")
DATA_PREFIXES = ("rings-config-",)


def _data_read(obj: Obj) -> bool:
    name = str(((obj.get("metadata") or {}).get("name")) or "")
    return name.endswith(DATA_SUFFIXES) or name.startswith(DATA_PREFIXES)


def _slim_configmap(obj: Obj) -> Obj:
    return _keeper(top=("data",) if _data_read(obj) else ())(obj)


def body_for(kind: str) -> Callable[[Obj], bool] | None:
    """Which objects of ``kind`` an informer reads past their kind and metadata (None: all):
    a ConfigMap whose data the cache would drop is never decoded past its metadata."""
    return _data_read if kind == "ConfigMap" else None


def _slim_pod(out: Obj, pod: Obj) -> Obj:
    annotations = (out.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        for key in (CA_ANNOTATION, URL_ANNOTATION):  # a kilobyte per pod, for the pod's own files only
            annotations.pop(key, None)
    spec = pod.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
        out["spec"] = {"containers": [{k: c[k] for k in ("name", "resources", "restartPolicyRules") if k in c}
                                      for c in spec["containers"] if isinstance(c, dict)]}  # fmt: skip
        if isinstance(spec.get("initContainers"), list):  # names only: whether the pod restarts in place
            out["spec"]["initContainers"] = [{"name": c.get("name")} for c in spec["initContainers"] if isinstance(c, dict)]
        # nodeName, schedulingGroup: whether a gang is placed yet (reconcile/gang.py); resourceClaims:
        # the DRA devices usage counts (reconcile/dra.py).
        for key in ("nodeName", "schedulingGroup", "resourceClaims"):
            if key in spec:
                out["spec"][key] = spec[key]
    return out


# Why each key stays (besides metadata, kept for every kind as said above; a pod's copy of the
# progress endpoint's CA, reconcile/push.py, is the one annotation left out):
SLIM: dict[str, Transform] = {
    # status, all of it: phase (rules, clean-up, Beam's "cluster running"), reason (Evicted),
    # containerStatuses' states with exit codes, reasons and termination messages (restart
    # policy, failure messages, the decisive replica's result; the runs' start and finish
    # times, which usage counts). Of the spec only each container's name and resources, and
    # the pod's resourceClaims: usage counts what their limits and the claims' templates ask
    # for (reconcile/usage.py); the core renders new pods from the job, never from the pods it
    # sees. And what in-place restarts and gangs read:
    # the containers' restart rules, the init containers' names (reconcile/inplace.py), the
    # node a pod is bound to and its scheduling group (reconcile/gang.py).
    "Pod": lambda obj: _slim_pod(_keeper(top=("status",))(obj), obj),
    # spec.clusterIP: AscendJob hands the leader Service's cluster IP to every pod
    # (Kind.pod_inputs). Services are otherwise only looked up by name and deleted by uid.
    "Service": _keeper(spec=("clusterIP",)),
    # data: compared with the wanted data (a hostfile after a rescale) to decide a Patch; of
    # the hostfiles only (DATA_SUFFIXES, DATA_PREFIXES).
    "ConfigMap": _slim_configmap,
    # Nothing but its existence: the SSH key Secret is created once. Its data (a private
    # key) is not worth holding in the controller's memory either.
    "Secret": _keeper(),
    # status: BeamJob's verdict and status read its conditions (Complete, Failed) and
    # ``active``. Its spec (the submit pod's template) is never read.
    "Job": _keeper(top=("status",)),
    # LocalQueues: only their names, to know which queues a namespace has.
    "LocalQueue": _keeper(),
    # Kubernetes' own PodGroups (reconcile/gang.py): their existence and the scheduler's condition
    # (PodGroupScheduled), reported in the job's status.scheduling; recorded as GangGroup, apart
    # from Volcano's PodGroups, whatever kind the API server's list or watch gave them.
    "GangGroup": lambda obj: {**_keeper(top=("status",))(obj), "kind": "GangGroup"},
}
# Every other kind stays whole but for managedFields: the T9k jobs themselves (the executor
# PUTs status with the whole cached object), Kueue Workloads (released and finished by a
# status PUT of the whole cached object), ResourceFlavors (spec.nodeLabels, tolerations) and
# (Workload)PriorityClasses (value): few and small, or sent back whole.


def slim_for(kind: str) -> Transform:
    """What an informer of ``kind`` applies to each object before caching it.

    Idempotent, and never raises on any JSON object: the executor stores objects the cache
    already slimmed (a pod marked as being deleted), and a hostile object must not stop a watch.
    """
    return SLIM.get(kind, drop_managed_fields)


def plain_json_bodies(api: Any) -> None:
    """Let dict and list bodies (our plain JSON) skip the client's recursive model walk; every
    other value (models, datetimes, tuples) still takes it."""
    walk: Callable[[Any], Any] = api.sanitize_for_serialization

    def sanitize(obj: Any) -> Any:
        if isinstance(obj, (dict, list)):
            return obj
        return walk(obj)

    api.sanitize_for_serialization = sanitize
