"""Bad nodes: which nodes this job's later pods keep off, and which failures were the node's doing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile import nodes
from airflow_t9k.controller.reconcile.actions import Emit

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.passstate import PassState


def avoid(p: PassState) -> PassState:
    """Before any verdict: a replica that failed on a node the job avoids is replaced, not judged
    (reconcile/nodes.py). Off (no node is known) without ``--avoid-bad-nodes``."""
    if p.observed.nodes is None:
        return p
    for node in nodes.decide(p.sb, p.states, p.observed.nodes, p.observed.node_rules):
        entry = next(e for e in nodes.avoided(p.sb) if e["node"] == node)
        p.events.append(Emit("Warning", "NodeAvoided", f"The job's new pods avoid node {node}: {entry['message']}"))
    nodes.condition(p.sb, p.states)
    return p
