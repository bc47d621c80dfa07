"""The children a job should have: pod, service and config manifests, with labels and owners."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_t9k.controller.reconcile.push import PushTarget, inject
from airflow_t9k.kinds.base import (
    ANNOTATION_RESTARTS,
    LABEL_JOB,
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_PREFIX,
    LABEL_RANK,
    LABEL_TYPE,
    LABEL_UID,
    MANAGED_BY,
    InvalidSpec,
    JobKind,
    ModeOverride,
    Obj,
    ReplicaSpec,
    debug_enabled,
    deep,
    mode_entries,
)

QUEUE_LABEL = "scheduler.tensorstack.dev/queue"
PRIORITY_ANNOTATION = "scheduler.tensorstack.dev/priority"
ROLE_LABEL = "scheduler.tensorstack.dev/role"
OWNER_LABEL = "tensorstack.dev/owner-name"
DNS_LABEL_MAX = 63


@dataclass(frozen=True)
class Slot:
    """One replica: its type, rank, pod name and spec."""

    spec: ReplicaSpec
    rank: int
    pod_name: str

    @property
    def type(self) -> str:
        return self.spec.type


def slots(kind: JobKind, job: Obj) -> list[Slot]:
    return [
        Slot(spec, rank, kind.pod_name(job, spec.type, rank)) for spec in kind.replica_specs(job) for rank in range(spec.replicas)
    ]


def job_labels(job: Obj) -> dict[str, str]:
    return {
        LABEL_JOB: job["metadata"]["name"],
        LABEL_KIND: job["kind"],
        LABEL_MANAGED_BY: MANAGED_BY,
    }


def replica_selector(job: Obj, rtype: str, rank: int) -> dict[str, str]:
    """The labels one replica's pod carries and its Service selects (the job's uid among them)."""
    out = {LABEL_JOB: job["metadata"]["name"], LABEL_KIND: job["kind"], LABEL_TYPE: rtype, LABEL_RANK: str(rank)}
    if job["metadata"].get("uid"):
        out[LABEL_UID] = str(job["metadata"]["uid"])
    return out


def owner_reference(job: Obj) -> Obj:
    meta = job["metadata"]
    return {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def child_meta(job: Obj, name: str, labels: dict[str, str] | None = None) -> Obj:
    return {
        "name": name,
        "namespace": job["metadata"].get("namespace"),
        "labels": {**job_labels(job), **(labels or {})},
        "ownerReferences": [owner_reference(job)],
    }


# Seeds 001 and 003: a job that sets spec.scheduler.t9kScheduler goes into queue "default"
# with priority 50 unless it says otherwise (their example prints exactly these).
DEFAULT_QUEUE = "default"
DEFAULT_PRIORITY = 50


def scheduler_settings(job: Obj) -> Obj | None:
    """``spec.scheduler.t9kScheduler`` with the seeds' defaults filled in; None when it is not set."""
    sched = ((job.get("spec") or {}).get("scheduler") or {}).get("t9kScheduler")
    if not isinstance(sched, dict):
        return None
    return {"queue": DEFAULT_QUEUE, "priority": DEFAULT_PRIORITY, **{k: v for k, v in sched.items() if v is not None}}


def check_names(kind: JobKind, job: Obj) -> None:
    name = job["metadata"]["name"]
    if len(name) > DNS_LABEL_MAX:
        raise InvalidSpec(f"metadata.name must be at most {DNS_LABEL_MAX} characters (it becomes a label value)")
    for spec in kind.replica_specs(job):
        if spec.replicas and kind.wants_services(job, spec.type):
            longest = kind.service_name(job, spec.type, spec.replicas - 1)
            if len(longest) > DNS_LABEL_MAX:
                raise InvalidSpec(f"service name {longest!r} is longer than {DNS_LABEL_MAX} characters; shorten the job name")


def mode_override(kind: JobKind, job: Obj, rtype: str, resumed: bool) -> ModeOverride | None:
    """Debug mode replaces the entrypoint; after a pause, resumeSpecs may replace it."""
    if debug_enabled(job):
        for entry in mode_entries(job, "debug"):
            if entry.get("type") == rtype:
                default = kind.debug_default(rtype)
                return ModeOverride(
                    command=list(entry["command"]) if entry.get("command") else default.command,
                    args=[] if entry.get("command") else default.args,
                    skip_init_containers=bool(entry.get("skipInitContainer", False)),
                )
        return kind.debug_default(rtype)
    if resumed:
        for entry in mode_entries(job, "pause"):
            if entry.get("type") == rtype:
                return ModeOverride(
                    command=list(entry["command"]) if entry.get("command") else None,
                    args=list(entry["args"]) if entry.get("args") is not None else None,
                    skip_init_containers=bool(entry.get("skipInitContainer", False)),
                )
    return None


def build_pod(kind: JobKind, job: Obj, slot: Slot, restarts: int, resumed: bool, inputs: Obj | None = None,
              push: PushTarget | None = None) -> Obj:  # fmt: skip
    """``push``: the controller's progress endpoint, whose URL, CA and token every container gets (reconcile/push.py)."""
    template = deep(slot.spec.template)
    tmeta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    pod_spec["restartPolicy"] = "Never"  # the controller, not the kubelet, decides restarts
    labels = {**(tmeta.get("labels") or {}), **replica_selector(job, slot.type, slot.rank)}
    labels.update({OWNER_LABEL: job["metadata"]["name"], ROLE_LABEL: slot.type, LABEL_MANAGED_BY: MANAGED_BY})
    # The controller's own annotations (batch.tensorstack.dev/...) never come from a template: one
    # there would pre-authorize in-place restarts (in-place-restarts) or forge a progress URL or CA.
    own = f"{LABEL_PREFIX}/"
    kept = {k: v for k, v in (tmeta.get("annotations") or {}).items() if not str(k).startswith(own)}
    annotations = {**kept, ANNOTATION_RESTARTS: str(restarts)}
    sched = scheduler_settings(job)
    if sched and kind.queued(job, slot.type):
        labels[QUEUE_LABEL] = str(sched["queue"])
        annotations[PRIORITY_ANNOTATION] = str(sched["priority"])
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**child_meta(job, slot.pod_name, labels), "annotations": annotations},
        "spec": pod_spec,
    }
    kind.customize_pod(job, slot.spec, slot.rank, pod)
    if inputs is not None:
        kind.bind_inputs(job, slot.spec, slot.rank, pod, inputs)
    override = mode_override(kind, job, slot.type, resumed)
    if override:
        apply_override(kind, pod_spec, override)
    inject(kind, job, pod, push)
    restart_count_env(pod_spec)
    return pod


# The env reads the pod's own restart-count annotation (the downward API) rather than a copy of
# the number: the annotation is what the restart decisions read and write (plan.py sets it on
# the pod it creates), so the program always sees the count its pod was created under.
RESTART_COUNT_ENV = {
    "name": "T9K_RESTART_COUNT",
    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{ANNOTATION_RESTARTS}']"}},
}


def restart_count_env(pod_spec: Obj) -> None:
    """``T9K_RESTART_COUNT`` in every container (init containers too), replacing a user's."""
    for c in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        env = [e for e in c.get("env") or [] if not (isinstance(e, dict) and e.get("name") == RESTART_COUNT_ENV["name"])]
        c["env"] = [*env, deep(RESTART_COUNT_ENV)]


def apply_override(kind: JobKind, pod_spec: Obj, override: ModeOverride) -> None:
    main = kind.main_container(pod_spec)
    if main is not None:
        if override.command is not None:
            main["command"] = list(override.command)
            main.pop("args", None)
        if override.args is not None:
            main["args"] = list(override.args)
    if override.skip_init_containers:
        pod_spec.pop("initContainers", None)


def build_service(kind: JobKind, job: Obj, slot: Slot) -> Obj:
    ports = [
        {"name": p["name"], "port": p["port"], "targetPort": p.get("targetPort", p["port"]), "protocol": p.get("protocol", "TCP")}
        for p in kind.ports_for(job, slot.type)
    ]
    spec: Obj = {**kind.service_spec(job, slot.type), "selector": replica_selector(job, slot.type, slot.rank), "ports": ports}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_meta(
            job, kind.service_name(job, slot.type, slot.rank), {LABEL_TYPE: slot.type, LABEL_RANK: str(slot.rank)}
        ),
        "spec": spec,
    }


def build_extra(job: Obj, manifest: Obj) -> Obj:
    out = deep(manifest)
    out["metadata"] = {
        **child_meta(job, manifest["metadata"]["name"]),
        **{k: v for k, v in manifest["metadata"].items() if k != "name"},
    }
    return out


def build_ssh_secret(job: Obj, name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": child_meta(job, name)}
