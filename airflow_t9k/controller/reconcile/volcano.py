"""AscendJob gang scheduling through Volcano, as MindCluster's ascend-operator does it.

Where the cluster serves Volcano's PodGroup API (``Observed.volcano``) and Kueue does not
admit the job, the job owns one PodGroup ``<job>-<uid>`` (the operator's name) carrying the
job's labels and annotations, with ``minMember`` (``minAvailable``, else every pod), ``queue``,
``priorityClassName`` and ``minResources`` from ``runPolicy.schedulingPolicy``. Its pods are
created only once Volcano has taken the PodGroup in (phase neither empty nor Pending, as the
operator waits), carry ``scheduling.k8s.io/group-name`` and go to the ``volcano`` scheduler
unless the job names another. When the job ends the PodGroup is deleted.

Where Volcano is not served, a pod asked to use the ``volcano`` scheduler would stay Pending
for ever with no word: that scheduler does not exist. Such pods go to the default scheduler
instead and the job says so (an Event from the kind). Pure: everything comes in through the
job and ``Observed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import Action, Create, Delete
from airflow_t9k.controller.reconcile.desired import child_meta
from airflow_t9k.controller.reconcile.observe import Observed, is_deleting

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import JobKind, Obj

API_VERSION = "scheduling.volcano.sh/v1beta1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
SCHEDULER = "volcano"
WAITING_PHASES = ("", "Pending")  # Volcano has not taken the group in yet


def name(job: Obj) -> str:
    return f"{job['metadata']['name']}-{job['metadata'].get('uid', '')}"


def wanted(kind: JobKind, job: Obj, observed: Observed, queued: bool) -> bool:
    """A PodGroup for this job: the kind gangs its pods, Volcano is served, Kueue does not admit it."""
    return observed.volcano and not queued and kind.podgroup_spec(job) is not None


def podgroup(kind: JobKind, job: Obj) -> Obj:
    meta = child_meta(job, name(job))
    # MindCluster copies the job's labels and annotations onto the PodGroup; ours (managed-by,
    # the owner) stay, since the controller's watch selects on them.
    meta["labels"] = {**((job["metadata"].get("labels")) or {}), **meta["labels"]}
    annotations = job["metadata"].get("annotations") or {}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": meta, "spec": kind.podgroup_spec(job)}


def gate(kind: JobKind, job: Obj, observed: Observed, queued: bool, rendered: dict[str, Obj]) -> tuple[list[Action], bool]:
    """(actions, hold the pods back). Also points the rendered pods at the right scheduler."""
    if not wanted(kind, job, observed, queued):
        if not observed.volcano:
            for pod in rendered.values():
                if pod["spec"].get("schedulerName") == SCHEDULER:
                    del pod["spec"]["schedulerName"]  # no such scheduler here: the pod would never start
        return [], False
    group = observed.podgroups.get(name(job))
    if group is None or is_deleting(group):
        return ([Create(podgroup(kind, job))] if group is None else []), True
    for pod in rendered.values():
        pod["metadata"].setdefault("annotations", {})[GROUP_ANNOTATION] = name(job)
        pod["spec"].setdefault("schedulerName", SCHEDULER)
    return [], str((group.get("status") or {}).get("phase") or "") in WAITING_PHASES


def finished(observed: Observed) -> list[Action]:
    """The job ended: its PodGroup goes, as the operator's handleFinishedJob deletes it."""
    return [
        Delete("PodGroup", n, (g.get("metadata") or {}).get("uid")) for n, g in observed.podgroups.items() if not is_deleting(g)
    ]
