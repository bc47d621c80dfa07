"""The pods this pass would create, rendered before any gate decides whether they may exist."""

from __future__ import annotations

from airflow_t9k.controller.reconcile import nodes, priority
from airflow_t9k.controller.reconcile.desired import build_pod
from airflow_t9k.controller.reconcile.inplace import equip
from airflow_t9k.controller.reconcile.passstate import PassState, invalid
from airflow_t9k.kinds.base import InvalidSpec, debug_enabled


def render(p: PassState) -> PassState:
    """Only pods about to be created are rendered, but all of them at once: on the first pass
    that is every pod, so a bad variable fails the job before anything exists. A kind whose pods
    wait for a child (``pod_inputs`` is None: AscendJob's leader Service IP) renders none."""
    try:
        resumed = p.sb.condition("Paused") is not None
        inputs = p.kind.pod_inputs(p.job, p.observed)
        push = p.observed.progress_push  # the progress endpoint every replica is given (reconcile/push.py)
        p.rendered = (
            {} if inputs is None else
            {s.slot.pod_name: build_pod(p.kind, p.job, s.slot, 0, resumed, inputs, push) for s in p.states if s.pod is None}
        )  # fmt: skip
    except InvalidSpec as exc:
        return invalid(p, str(exc))
    # The job's priority as a PriorityClass, so kube-scheduler orders and preempts by it
    # (reconcile/priority.py); a template's own class wins.
    priority.apply(priority.choose(p.job, p.observed), p.rendered)
    # Off the nodes the job avoids (reconcile/nodes.py): decided in this pass's status, written first.
    for pod in p.rendered.values():
        nodes.exclude(pod, nodes.avoided_names(p.sb))
    if p.in_place and not debug_enabled(p.job):  # Debug replicas are never restarted
        for s in p.states:
            if s.slot.pod_name in p.rendered:
                equip(p.kind, p.rendered[s.slot.pod_name], s.slot.spec.restart, p.observed.restart_agent_image)
    return p
