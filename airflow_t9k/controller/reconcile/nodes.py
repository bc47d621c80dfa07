"""Bad nodes avoided (issue 47, item 2): a job's later pods keep off a node that hurt it.

A node is avoided by a job when
- two of the job's replica failures that its restart policy retries happened on it
  (``RepeatedFailures``), counted from ``status.restartHistory``, whose entries name the node; or
- a replica of the job is (or was, when it failed) on it while it is unhealthy
  (``NodeUnhealthy``): not Ready, cordoned (``kubectl drain``), or showing what the platform team
  names with ``--unhealthy-node-condition`` (a condition, a taint or a label: ``NodeRule``).

The decision is recorded first, in ``status.avoidedNodes`` (node, reason, message, time), then
acted on: every pod created from then on carries a required node affinity that excludes those
nodes by name (``exclude``), so the scheduler places it elsewhere while another node fits, and it
waits (condition ``AvoidingNodes``, reason ``OnlyAvoidedNodesFit``) when none does: it does not
fail. A failure on a node that is (or was found) unhealthy is the node's doing: the replica is
replaced without spending its restart budget, whatever its policy, as an evicted one is. Repeated
failures are still counted: they only move the job, since a program that fails on every node must
spend its budget and end, not wander from node to node for free. The list is dropped when the
job ends (reconcile/progress.py ``finish``).

Pure: the step that calls it is steps/avoid.py; the nodes come from the runner's watch
(controller/nodewatch.py), and only with ``--avoid-bad-nodes on``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.reconcile.disruption import HISTORY, node_of
from airflow_t9k.controller.reconcile.inplace import authorized
from airflow_t9k.controller.reconcile.status import bounded, timestamp
from airflow_t9k.kinds.base import UNLIMITED

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.slotstate import SlotState
    from airflow_t9k.controller.reconcile.status import StatusBuilder

Obj = dict[str, Any]

AVOIDED = "avoidedNodes"  # status field
CONDITION = "AvoidingNodes"
REPEATED = "RepeatedFailures"
UNHEALTHY = "NodeUnhealthy"
FAILURES = 2  # retried failures on one node that make the job avoid it (the "twice")
LIMIT = 32  # entries: a job that hurt itself on more nodes than this has a bigger problem than placement
# The field a node affinity can match a node's name by (labels can lie: kubernetes.io/hostname is
# the kubelet's hostname, not always the Node's name).
NAME_FIELD = "metadata.name"


@dataclass(frozen=True)
class NodeRule:
    """One ``--unhealthy-node-condition``: what makes a node unhealthy besides NotReady and cordoned.

    ``Type=Status`` (a node condition, e.g. ``GPUHealthy=False``), ``taint:KEY`` or
    ``taint:KEY=VALUE`` (a taint of any effect), ``label:KEY=VALUE`` (e.g. a health label a GPU
    operator sets)."""

    source: str  # "condition", "taint" or "label"
    key: str
    value: str | None = None

    def seen(self, node: Obj) -> str | None:
        """What of this rule the node shows, in words; None when it does not."""
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        if self.source == "condition":
            for c in status.get("conditions") or []:
                if isinstance(c, dict) and c.get("type") == self.key and str(c.get("status")) == self.value:
                    said = f": {c['message']}" if c.get("message") else ""
                    return f"condition {self.key}={self.value}{said}"
            return None
        if self.source == "taint":
            for t in spec.get("taints") or []:
                if isinstance(t, dict) and t.get("key") == self.key and (self.value is None or t.get("value") == self.value):
                    return f"taint {self.text}"
            return None
        labels = meta.get("labels") or {}
        return f"label {self.text}" if isinstance(labels, dict) and labels.get(self.key) == self.value else None

    @property
    def text(self) -> str:
        if self.source == "condition":
            return f"{self.key}={self.value}"
        return self.key if self.value is None else f"{self.key}={self.value}"


def parse_rule(text: str) -> NodeRule:
    """``GPUHealthy=False``, ``taint:nvidia.com/gpu.unhealthy``, ``label:nvidia.com/gpu.health=unhealthy``."""
    source, sep, rest = text.partition(":")
    if not sep or source not in ("taint", "label"):
        source, rest = "condition", text
    key, eq, value = rest.partition("=")
    key, value = key.strip(), value.strip()
    if not key or any(c.isspace() for c in key):
        raise ValueError(f"{text!r}: a name is needed before '='")
    if source in ("condition", "label") and not value:
        raise ValueError(f"{text!r}: say the value that means unhealthy, e.g. 'GPUHealthy=False' or 'label:KEY=VALUE'")
    if source == "condition" and key == "Ready":
        # Judged already (not True is unhealthy); 'Ready=True' would make every healthy node a bad one.
        raise ValueError(f"{text!r}: a node's Ready condition is judged already; name another condition")
    return NodeRule(source, key, value if eq else None)


def unhealthy(node: Obj | None, rules: tuple[NodeRule, ...]) -> str | None:
    """Why a node is unhealthy for a job's replicas, or None. A node that is not known (deleted, or
    not seen yet) is not judged: a deleted node's pods come back through their disruption."""
    if not node:
        return None
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") != "True":
        said = f" ({ready['reason']})" if ready.get("reason") else ""
        return f"the node is not Ready{said}"
    if (node.get("spec") or {}).get("unschedulable"):
        return "the node is cordoned (unschedulable; being drained)"
    for rule in rules:
        if (seen := rule.seen(node)) is not None:
            return f"the node shows {seen}"
    return None


def avoided(sb: StatusBuilder) -> list[Obj]:
    """The list as recorded; whatever else a status holds there (someone else's write) is dropped,
    and no more than ``LIMIT`` entries are read: a pod's affinity stays small."""
    found = sb.new.get(AVOIDED)
    entries = found if isinstance(found, list) else []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("node"), str) and e["node"]][:LIMIT]


def avoided_names(sb: StatusBuilder) -> list[str]:
    return sorted({str(e["node"]) for e in avoided(sb)})


def note(sb: StatusBuilder, node: str, reason: str, message: str) -> bool:
    """Put a node on the job's list unless it is there; True when it was new."""
    entries = avoided(sb)
    if any(e["node"] == node for e in entries) or len(entries) >= LIMIT:
        return False
    sb.new[AVOIDED] = [*entries, {"node": node, "reason": reason, "message": bounded(message, 300), "time": timestamp(sb.now)}]
    return True


def retried_failure(s: SlotState) -> bool:
    """The replica failed in a way its restart policy retries, restarts left or not: a failure
    the node may have caused (``Never`` retries nothing, so nothing is blamed on a node)."""
    if s.pod is None or s.phase != "Failed" or not s.ended:
        return False
    unbounded = replace(s.slot.spec.restart, limit=UNLIMITED)
    return unbounded.allows(False, 0, s.exit_code)


def failures_on(sb: StatusBuilder) -> dict[str, int]:
    """Retried failures on record per node (restartHistory entries name the node they failed on)."""
    counts: dict[str, int] = {}
    for e in sb.new.get(HISTORY) or []:
        if isinstance(e, dict) and e.get("node"):
            counts[str(e["node"])] = counts.get(str(e["node"]), 0) + 1
    return counts


def on_record(sb: StatusBuilder, s: SlotState) -> bool:
    """Whether the history already has this failure: under its pod's uid (a replacement), or under
    the key of the in-place restart it would be (steps/act.py keys those by the run allowed)."""
    uid = ((s.pod or {}).get("metadata") or {}).get("uid")
    keys = {uid, f"{uid}/in-place/{authorized(s.pod or {}) + 1}"} if uid else set()
    return any(isinstance(e, dict) and e.get("podUID") in keys and e.get("node") for e in sb.new.get(HISTORY) or [])


def decide(sb: StatusBuilder, states: list[SlotState], nodes: Mapping[str, Obj], rules: tuple[NodeRule, ...]) -> list[str]:
    """Put on the list the nodes that hurt the job in what this pass sees, and mark each replica that
    failed on an unhealthy node as the node's doing (``SlotState.node_caused``). The nodes newly avoided."""
    added: list[str] = []
    counts = failures_on(sb)
    for s in states:
        node = node_of(s.pod)
        if node is None or s.phase is None:
            continue
        why = unhealthy(nodes.get(node), rules)
        if why is not None and note(sb, node, UNHEALTHY, f"Replica {s.slot.pod_name} was on it when {why}."):
            added.append(node)
        if not retried_failure(s):
            continue
        seen = counts.get(node, 0) + (0 if on_record(sb, s) else 1)
        if seen >= FAILURES and note(sb, node, REPEATED, f"{seen} replica failures on this node, the last {s.slot.pod_name}'s."):
            added.append(node)
    # A failure on a node that is, or was found, unhealthy is the node's doing. Repeated failures
    # only move the job: a program that fails everywhere must still spend its budget and end.
    sick = {str(e["node"]) for e in avoided(sb) if e.get("reason") == UNHEALTHY}
    for s in states:
        node = node_of(s.pod)
        if node is not None and s.phase == "Failed" and s.ended and (node in sick or unhealthy(nodes.get(node), rules)):
            s.node_caused = f"failed on node {node}, which is unhealthy ({avoided_reason(sb, node)})"
    return added


def avoided_reason(sb: StatusBuilder, node: str) -> str:
    return next((str(e.get("message") or e.get("reason")) for e in avoided(sb) if e["node"] == node), "unhealthy")


def waiting(states: list[SlotState]) -> str | None:
    """The scheduler's words for a replica it cannot place, when one waits (affinity included)."""
    for s in states:
        if s.phase != "Pending" or node_of(s.pod) is not None:
            continue
        for c in ((s.pod or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
                return f"{s.slot.pod_name}: {c.get('message') or 'unschedulable'}"
    return None


def condition(sb: StatusBuilder, states: list[SlotState]) -> None:
    """``AvoidingNodes``: which nodes, and whether a replica waits because only those would fit."""
    names = avoided_names(sb)
    if not names:
        return
    listed = ", ".join(names)
    stuck = waiting(states)
    if stuck is not None:
        sb.set_condition(CONDITION, True, "OnlyAvoidedNodesFit",
                         bounded(f"The job avoids {listed} and waits for another node to fit ({stuck}).", 600))  # fmt: skip
    else:
        sb.set_condition(CONDITION, True, "NodesAvoided", f"The job's new pods avoid {listed}.")


def exclude(pod: Obj, names: list[str]) -> None:
    """Add ``metadata.name NotIn names`` to every required node selector term of the pod (terms
    are ORed, so each must carry it); the template's own affinity is kept."""
    if not names:
        return
    spec = pod.setdefault("spec", {})
    affinity = copy.deepcopy(spec.get("affinity") or {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    expression = {"key": NAME_FIELD, "operator": "NotIn", "values": list(names)}
    required["nodeSelectorTerms"] = [{**t, "matchFields": [*(t.get("matchFields") or []), expression]} for t in terms]
    spec["affinity"] = affinity


def cleared(sb: StatusBuilder) -> None:
    """The job ended: nothing is placed for it any more."""
    sb.new.pop(AVOIDED, None)
    sb.new["conditions"] = [c for c in sb.new.get("conditions") or [] if c.get("type") != CONDITION]
