"""The job's phase and conditions while it runs, and when it ends (seeds 001 and 003)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile import nodes
from airflow_t9k.controller.reconcile.status import Obj, StatusBuilder, bounded, failure_detail

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.slotstate import SlotState


# Condition types and reasons as seeds 001 and 003 print a job's status: the type is
# "Initializing" (their lists say "Initialized"; their examples, what the controller writes, say
# "Initializing"), and a condition in its normal state (Initializing True, Running True,
# ReplicaFailure False) has reason "-". A reason is a word only where there is something to say.
INITIALIZED = "Initializing"
LEGACY_INITIALIZED = "Initialized"  # what this controller wrote before
NORMAL = "-"


def finish(sb: StatusBuilder, phase: str, reason: str, message: str) -> None:
    sb.set_phase(phase)
    succeeded = phase == "Succeeded"
    sb.set_condition("Completed", succeeded, reason, message)
    sb.set_condition("Failed", not succeeded, reason, message)
    sb.set_condition("Running", False, phase, f"The job has {'succeeded' if succeeded else 'failed'}.")
    nodes.cleared(sb)  # nothing is placed for it any more


def progress(sb: StatusBuilder, states: list[SlotState], children_missing: bool) -> None:
    all_exist = all(s.pod is not None and not s.creating for s in states)
    if all_exist and not children_missing and not sb.is_true(INITIALIZED):
        sb.set_condition(INITIALIZED, True, NORMAL, "The job has been initialized successfully.")
    elif sb.condition(INITIALIZED) is None:
        sb.set_condition(INITIALIZED, False, "Creating", "Creating the job's replicas.")
    started = all_exist and all(s.phase not in (None, "Pending") for s in states)
    old = sb.old_phase
    if old in ("Paused", "Resuming"):
        sb.set_condition("Paused", False, "Resumed", "The job has been resumed.")
        # A replica that already ended after the resume counts as resumed: waiting for it to
        # be Running again kept the job Resuming forever.
        phase = "Running" if started else "Resuming"
    elif old == "Running" or started:
        phase = "Running"  # restarts do not send a running job back to Pending
    else:
        phase = "Pending"
    # Seeds 001/003: Unknown is "the controller cannot obtain the job's phase". A pod whose node
    # stopped reporting has phase Unknown, so the job's own state cannot be known until it reports.
    unknown = [s.slot.pod_name for s in states if s.phase == "Unknown"]
    if unknown and phase in ("Pending", "Running"):
        phase = "Unknown"
    sb.set_phase(phase)
    if phase == "Running":
        sb.set_condition("Running", True, NORMAL, "All pods are running normally.")  # seed 001's
    elif phase == "Unknown":
        sb.set_condition("Running", False, "Unknown",
                         f"The state of pod(s) {', '.join(unknown)} cannot be obtained (phase Unknown, "
                         "usually a node that stopped reporting); the job's phase is unknown until they "
                         "report again.")  # fmt: skip
    else:
        sb.set_condition("Running", False, phase, f"The job is {phase.lower()}.")


def replica_failure(sb: StatusBuilder, states: list[SlotState]) -> None:
    failed = sorted((s for s in states if s.phase == "Failed" and not s.disrupted), key=lambda s: finished_at(s.pod))
    if failed:
        detail = "; ".join(f"{s.slot.pod_name}: {failure_detail(s.pod)}" for s in failed)
        sb.set_condition("ReplicaFailure", True, "ReplicaFailed", f"Replicas failed: {detail}")
    elif sb.condition("ReplicaFailure") is not None or sb.is_true(INITIALIZED):
        sb.set_condition("ReplicaFailure", False, NORMAL, "All pods are running normally.")  # seed 001's


def finished_at(pod: Obj | None) -> str:
    """When the pod's first container to end ended (RFC 3339 sorts as text); '~' when unknown, last."""
    times = [str(t["finishedAt"]) for cs in ((pod or {}).get("status") or {}).get("containerStatuses") or []
             if (t := (cs.get("state") or {}).get("terminated") or {}).get("finishedAt")]  # fmt: skip
    return min(times) if times else "~"


def root_cause(sb: StatusBuilder, states: list[SlotState]) -> None:
    """Name the replica that failed first, by its container's finish time, not the last one noticed:
    the others often fail because it did (a lost peer, a broken collective)."""
    failed = [s for s in states if s.phase == "Failed" and not s.disrupted]
    if not failed:
        return
    first = min(failed, key=lambda s: finished_at(s.pod))
    cause: Obj = {"replica": first.slot.pod_name, "detail": bounded(failure_detail(first.pod), 500)}
    if first.exit_code is not None:
        cause["exitCode"] = first.exit_code
        policy = first.slot.spec.restart
        # Under the ExitCode policy a code it would not retry is a permanent error (seed 001):
        # the Airflow task should not spend its retries on it either.
        retried = replace(policy, limit=1).allows(False, 0, first.exit_code)  # whatever is left of the limit
        cause["permanent"] = policy.policy == "ExitCode" and not retried
    if finished_at(first.pod) != "~":
        cause["finishedAt"] = finished_at(first.pod)
    sb.new["rootCause"] = cause


def rename_legacy(sb: StatusBuilder) -> None:
    """A job this controller initialized before it followed the seeds: its ``Initialized``
    condition becomes ``Initializing`` in place, keeping its status and transition time."""
    conditions = sb.new["conditions"]
    for i, c in enumerate(conditions):
        if c.get("type") != LEGACY_INITIALIZED:
            continue
        if sb.condition(INITIALIZED) is not None:
            del conditions[i]
        else:
            reason = NORMAL if c.get("reason") == LEGACY_INITIALIZED else c.get("reason")
            conditions[i] = {**c, "type": INITIALIZED, "reason": reason}
        return
