"""What goes when a job ends: its clean-up policy applied to its pods and Services."""

from __future__ import annotations

from airflow_t9k.controller.reconcile.actions import Action, Delete
from airflow_t9k.controller.reconcile.observe import Observed, is_deleting, pod_phase
from airflow_t9k.kinds.base import DEFAULT_CLEANUP_POLICY, LABEL_TYPE, JobKind, Obj


def cleanup(kind: JobKind, job: Obj, observed: Observed) -> list[Action]:
    override = kind.cleanup_types(job)
    if override is not None:
        policy, types = override
    else:
        policy, types = (job.get("spec") or {}).get("cleanUpPolicy") or DEFAULT_CLEANUP_POLICY, None
    if policy not in ("All", "Unfinished", "Pending"):
        return []
    # "Pending" (AscendJob's None): a pod not yet started would only start after the end and
    # hold its devices for nothing, so it goes; started pods, and every Service, stay.
    unfinished = ("Pending",) if policy == "Pending" else ("Pending", "Running", "Unknown")

    def in_scope(obj: Obj) -> bool:
        return types is None or (obj["metadata"].get("labels") or {}).get(LABEL_TYPE) in types

    actions: list[Action] = []
    for name, pod in observed.pods.items():
        if is_deleting(pod) or not in_scope(pod):
            continue
        if policy == "All" or pod_phase(pod) in unfinished:
            actions.append(Delete("Pod", name, _uid(pod)))
    if policy != "Pending":
        actions += [Delete("Service", n, _uid(s)) for n, s in observed.services.items() if in_scope(s)]
    return actions


def remove_all(observed: Observed) -> list[Action]:
    return [Delete(k, n, _uid(o)) for k, objs in (("Pod", observed.pods), ("Service", observed.services))
            for n, o in objs.items() if not is_deleting(o)]  # fmt: skip


def _uid(obj: Obj) -> str | None:
    return obj.get("metadata", {}).get("uid")
