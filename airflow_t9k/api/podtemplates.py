"""Where a job of each kind holds its pod templates, by replica type. Pure.

``replicaSpecs`` (a list keyed by ``type``, or AscendJob's map keyed by type), ``worker`` (MPI,
DeepSpeed, ColossalAI: type ``worker``; their launchers are built from it or run nothing of the
user's) and BeamJob's submit Job (``jobTemplate.spec``: type ``batchjob``, as its pods are named).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

WORKER = "worker"
BEAM_SUBMIT = "batchjob"


def template_holders(job: Obj, create: bool = False) -> list[tuple[str, Obj]]:
    """(replica type, the mapping whose ``template`` key holds that type's pod template), for
    every pod template of ``job``, in the job's order. With ``create``, holders a job may leave
    out when a job template supplies them (a worker's, BeamJob's submit Job) are made, empty;
    what is not a mapping is skipped, for the API server or the kind to refuse."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return []
    found: list[tuple[str, Obj]] = []
    replicas = spec.get("replicaSpecs")
    if isinstance(replicas, dict):
        found += [(str(t), r) for t, r in replicas.items() if isinstance(r, dict)]
    elif isinstance(replicas, list):
        found += [(str(r.get("type")), r) for r in replicas if isinstance(r, dict)]
    worker = spec.get("worker")
    if isinstance(worker, dict):
        found.append((WORKER, worker))
    submit = spec.get("jobTemplate")
    if create and job.get("kind") == "BeamJob" and submit is None:
        submit = spec["jobTemplate"] = {}
    if isinstance(submit, dict):
        if create and submit.get("spec") is None:
            submit["spec"] = {}
        if isinstance(submit.get("spec"), dict):
            found.append((BEAM_SUBMIT, submit["spec"]))
    return found


def pod_templates(job: Obj) -> list[Obj]:
    """Every pod template a job holds (changing one changes the job)."""
    return [h["template"] for _, h in template_holders(job) if isinstance(h.get("template"), dict)]
