"""What the I/O layer saw of a job's children, keyed by name."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_t9k.api.paths import GANG_GROUP, child_kind

if TYPE_CHECKING:
    from datetime import datetime

    from airflow_t9k.controller.reconcile.nodes import NodeRule
    from airflow_t9k.controller.reconcile.priority import PriorityBand
    from airflow_t9k.controller.reconcile.push import PushTarget

Obj = dict[str, Any]


@dataclass(frozen=True)
class Observed:
    pods: Mapping[str, Obj] = field(default_factory=dict)
    services: Mapping[str, Obj] = field(default_factory=dict)
    configmaps: Mapping[str, Obj] = field(default_factory=dict)
    secrets: Mapping[str, Obj] = field(default_factory=dict)
    jobs: Mapping[str, Obj] = field(default_factory=dict)  # batch/v1 Jobs (BeamJob's submit job)
    workloads: Mapping[str, Obj] = field(default_factory=dict)  # Kueue Workloads (docs/queueing.md)
    # How the controller uses Kueue (--queueing; docs/queueing.md): "kueue": every named queue
    # goes through it; "auto": the cluster serves Kueue's Workload API, and a job uses it when
    # its queue names a LocalQueue of its namespace; "absent": no Workload API; "off": never.
    queueing: str = "off"
    local_queues: Collection[str] = ()  # LocalQueue names in the job's namespace
    flavors: Mapping[str, Obj] = field(default_factory=dict)  # ResourceFlavors by name
    priority_classes: Mapping[str, Obj] = field(default_factory=dict)  # (Workload)PriorityClasses by name
    # Whether the cluster serves Volcano's PodGroup API (scheduling.volcano.sh/v1beta1), and the
    # job's PodGroups: AscendJob gang scheduling as MindCluster does it (reconcile/volcano.py).
    volcano: bool = False
    podgroups: Mapping[str, Obj] = field(default_factory=dict)
    # The job template a job names and has not merged yet (None: not found), and how long such a
    # job waits for a missing one from its creation (reconcile/template.py).
    template: Obj | None = None
    template_wait: float = 30.0
    # What the job's reporting replica printed last (controller/reports.py): {"replica", "time",
    # "values"}, None when nothing is followed; folded into status.progress at most once per
    # ``progress_interval`` seconds (reconcile/reporting.py).
    report: Obj | None = None
    progress_interval: float = 10.0
    # Hang detection (reconcile/stall.py): whether the controller hears the job's reports now (its
    # reporting replica's log followed, or the push path: runner.py), and since when this controller
    # has been listening (its start as leader): silence is only counted from then. None: no bound.
    progress_heard: bool = True
    progress_since: datetime | None = None
    # The controller's progress endpoint (--progress-endpoint), whose URL, CA and token every
    # replica gets (reconcile/push.py); None: the push path is off.
    progress_push: PushTarget | None = None
    # --allow-beam-external-service: a BeamJob may ask for a NodePort or LoadBalancer Service (kinds/beam.py).
    beam_external_service: bool = False
    # In-place restarts (reconcile/inplace.py): None where the cluster offers them (the API server
    # keeps a RestartAllContainers rule and every node declares the feature), else why not; and
    # the image the restart gate and agent run (None: each replica's main container's).
    in_place_problem: str | None = "not detected (the controller looks when it starts)"
    restart_agent_image: str | None = None
    # Gang scheduling with no add-on (reconcile/gang.py): None where the API server serves the
    # Workload API's PodGroups (scheduling.k8s.io/v1alpha2), else why not; and the job's PodGroups
    # of that API (kind "GangGroup" here, apart from Volcano's).
    gang_problem: str | None = "not detected (the controller looks when it starts)"
    gangs: Mapping[str, Obj] = field(default_factory=dict)
    # Priority without Kueue (reconcile/priority.py): --priority-class-map, and the cluster's
    # PriorityClasses (scheduling.k8s.io) by name, watched only where the map is set.
    priority_map: tuple[PriorityBand, ...] = ()
    pod_priority_classes: Mapping[str, Obj] = field(default_factory=dict)
    # Bad nodes (reconcile/nodes.py): the cluster's nodes by name, None where the controller does
    # not watch them (--avoid-bad-nodes off); and what else makes one unhealthy
    # (--unhealthy-node-condition).
    nodes: Mapping[str, Obj] | None = None
    node_rules: tuple[NodeRule, ...] = ()
    # DRA (reconcile/dra.py): the job namespace's ResourceClaimTemplates by name, where the API
    # server serves them; status.usage counts the devices a pod's claims from them ask for.
    claim_templates: Mapping[str, Obj] = field(default_factory=dict)

    @classmethod
    def of(cls, *objects: Obj, queueing: str = "off", local_queues: Collection[str] = (), volcano: bool = False,
           beam_external_service: bool = False) -> Observed:  # fmt: skip
        """Build from a flat list of objects (convenient in tests and in the cache)."""
        kinds = (
            "Pod",
            "Service",
            "ConfigMap",
            "Secret",
            "Job",
            "Workload",
            "ResourceFlavor",
            "PriorityClass",
            "PodGroup",
            GANG_GROUP,
        )
        by_kind: dict[str, dict[str, Obj]] = {k: {} for k in kinds}
        for o in objects:
            kind = "PriorityClass" if o["kind"] == "WorkloadPriorityClass" else child_kind(o)
            by_kind[kind][o["metadata"]["name"]] = o
        return cls(by_kind["Pod"], by_kind["Service"], by_kind["ConfigMap"], by_kind["Secret"], by_kind["Job"],
                   by_kind["Workload"], queueing, tuple(local_queues), by_kind["ResourceFlavor"], by_kind["PriorityClass"],
                   volcano, by_kind["PodGroup"], beam_external_service=beam_external_service,
                   gangs=by_kind[GANG_GROUP])  # fmt: skip

    def of_kind(self, kind: str) -> Mapping[str, Obj]:
        return {"Pod": self.pods, "Service": self.services, "ConfigMap": self.configmaps, "Secret": self.secrets,
                "Job": self.jobs, "Workload": self.workloads, "PodGroup": self.podgroups,
                GANG_GROUP: self.gangs}[kind]  # fmt: skip


def is_deleting(obj: Obj) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")
