"""What Kueue's admission puts on an admitted job's pods, as Kueue's own job integrations do it.

Kueue's jobframework starts an admitted job with, for each podSet (``getPodSetsInfoFromStatus``
and ``podset.Merge`` in Kueue's code):

- the node labels (as ``nodeSelector``) and tolerations of the ResourceFlavors it assigned;
- the label ``kueue.x-k8s.io/podset: <podset>`` and the annotation ``kueue.x-k8s.io/workload: <workload>``;
- where the podSet got a topology assignment (topology-aware scheduling, TAS): the scheduling gate
  ``kueue.x-k8s.io/topology``, which Kueue's topology ungater removes pod by pod once it has given
  each pod its topology domain (it finds the pods by the workload annotation and the podset
  label), and ``kueue.x-k8s.io/podset-unconstrained-topology: "true"`` where the podSet
  asked for no particular topology;
- each admission check's ``podSetUpdates`` for that podSet: labels, annotations, nodeSelector,
  tolerations (a ProvisioningRequest check, for instance, sends the pods to the nodes it
  provisioned).

A label, annotation or nodeSelector key set to two different values (between flavors, checks and
the pod itself) is a conflict: Kueue fails such a job to start (``FailedToStart``) since no retry
can help; so does the controller, naming the check, the field and both values. Tolerations are
added once each. Pure.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

PODSET_LABEL = "kueue.x-k8s.io/podset"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
TOPOLOGY_ANNOTATIONS = {  # what a replica's pod template says -> the podSet's topologyRequest field
    "kueue.x-k8s.io/podset-required-topology": "required",
    "kueue.x-k8s.io/podset-preferred-topology": "preferred",
    UNCONSTRAINED: "unconstrained",
}


class Conflict(Exception):
    """Two values for one key: the job cannot start as admitted."""


@dataclass
class PodSetInfo:
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[Obj] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)
    origin: dict[tuple[str, str], str] = field(default_factory=dict)  # (field, key) -> who set it

    def merge(self, labels: Obj | None = None, annotations: Obj | None = None, node_selector: Obj | None = None,
              tolerations: list[Obj] | None = None, gates: list[str] | None = None, source: str = "",
              sources: dict[tuple[str, str], str] | None = None) -> None:  # fmt: skip
        """Add another's values; ``sources`` names who set each key when they come from several."""
        for what, mine, theirs in (("labels", self.labels, labels), ("annotations", self.annotations, annotations),
                                   ("nodeSelector", self.node_selector, node_selector)):  # fmt: skip
            for key, value in (theirs or {}).items():
                who = (sources or {}).get((what, key), source)
                if key in mine and mine[key] != str(value):
                    raise Conflict(f"conflict for {what} {key}: {self.origin.get((what, key), 'the pod')} sets "
                                   f"{mine[key]!r}, {who} sets {str(value)!r}")  # fmt: skip
                mine[key] = str(value)
                self.origin.setdefault((what, key), who)
        for t in tolerations or []:
            if t not in self.tolerations:
                self.tolerations.append(copy.deepcopy(t))
        for g in gates or []:
            if g not in self.gates:
                self.gates.append(g)


def topology_request(template: Obj, index_label: str) -> Obj | None:
    """A podSet's ``topologyRequest`` from its pod template's Kueue TAS annotations, as Kueue's
    integrations read them; ``podIndexLabel`` is the replica's rank, so Kueue's ungater places
    the pods in rank order."""
    annotations = ((template.get("metadata") or {}).get("annotations")) or {}
    request: Obj = {}
    for annotation, key in TOPOLOGY_ANNOTATIONS.items():
        if annotation in annotations:
            request[key] = (
                str(annotations[annotation]).lower() == "true" if key == "unconstrained" else str(annotations[annotation])
            )
    if not request:
        return None
    request["podIndexLabel"] = index_label
    return request


def from_admission(wl: Obj, podset: str, flavors: Any) -> PodSetInfo:
    """The podSet's info from the Workload's admission and admission checks; raises Conflict."""
    status = wl.get("status") or {}
    assignment: Obj = next(
        (a for a in (status.get("admission") or {}).get("podSetAssignments") or [] if a.get("name") == podset), {}
    )
    # Kueue (TopologyAwareScheduling on, its default since v0.14) names the Workload on every pod.
    info = PodSetInfo(
        labels={PODSET_LABEL: podset}, annotations={WORKLOAD_ANNOTATION: (wl.get("metadata") or {}).get("name", "")}
    )
    for flavor_name in sorted(set((assignment.get("flavors") or {}).values())):
        flavor = (flavors.get(flavor_name) or {}).get("spec") or {}
        info.merge(node_selector=flavor.get("nodeLabels"), tolerations=flavor.get("tolerations"),
                   source=f"ResourceFlavor {flavor_name}")  # fmt: skip
    if assignment.get("topologyAssignment"):
        spec_podset: Obj = next((p for p in (wl.get("spec") or {}).get("podSets") or [] if p.get("name") == podset), {})
        request = spec_podset.get("topologyRequest") or {}
        extra = {} if request.get("required") or request.get("preferred") or request.get("unconstrained") is not None \
            else {UNCONSTRAINED: "true"}  # fmt: skip
        info.merge(annotations=extra, gates=[TOPOLOGY_GATE], source="topology-aware scheduling")
    for check in status.get("admissionChecks") or []:
        for update in check.get("podSetUpdates") or []:
            if update.get("name") == podset:
                info.merge(update.get("labels"), update.get("annotations"), update.get("nodeSelector"),
                           update.get("tolerations"), source=f"admission check {check.get('name')}")  # fmt: skip
                break
    return info


def apply(pod: Obj, info: PodSetInfo, source: str = "the pod") -> None:
    """Merge ``info`` into a pod about to be created (in place); raises Conflict, naming ``source``
    for the pod's own values."""
    meta, spec = pod.setdefault("metadata", {}), pod.setdefault("spec", {})
    own = PodSetInfo(dict(meta.get("labels") or {}), dict(meta.get("annotations") or {}), dict(spec.get("nodeSelector") or {}),
                     list(spec.get("tolerations") or []), [g.get("name") for g in spec.get("schedulingGates") or []])  # fmt: skip
    own.origin = {(what, key): source for what, d in (("labels", own.labels), ("annotations", own.annotations),
                                                      ("nodeSelector", own.node_selector)) for key in d}  # fmt: skip
    own.merge(info.labels, info.annotations, info.node_selector, info.tolerations, info.gates, sources=info.origin)
    meta["labels"], meta["annotations"] = own.labels, own.annotations
    if own.node_selector:
        spec["nodeSelector"] = own.node_selector
    if own.tolerations:
        spec["tolerations"] = own.tolerations
    if own.gates:
        spec["schedulingGates"] = [{"name": g} for g in own.gates]
