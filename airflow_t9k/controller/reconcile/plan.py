"""``plan(job, observed, now)``: decide what to create and delete, and what the status is.

A pass is the ordered list ``STEPS``: each step takes the plan so far (``PassState``,
reconcile/passstate.py) and returns it, and may end the pass, after which only the steps
marked ``always`` run. The list is the order of decisions (docs/design.md, "One pass"):

1. a job being deleted is left alone; a finished job whose ``ttlSecondsAfterFinished`` has
   passed is deleted; a job naming a template gets it merged in first;
2. an invalid spec fails the job with a condition naming the problem, and touches nothing;
3. a finished job is only cleaned up: its phase never changes again;
4. Pause mode deletes every pod (phase ``Paused``); Kueue and Volcano hold pods back until
   they admit the job;
5. its deadline, a kind's own verdict (BeamJob: its submit Job), then failure rules, then
   success rules, are checked against the replicas' outcomes (Debug mode skips this); a
   job whose replicas have all ended without satisfying a rule fails rather than hanging;
   a running job silent past its ``progressDeadlineSeconds`` is stalled (reconcile/stall.py);
6. missing children are created, and failed replicas whose restart policy allows it are
   deleted, to be recreated under the same name by a later pass;
7. a job that just finished applies its clean-up policy.

A new behaviour is a new step in this list, in a module of its own under reconcile/steps/.
Kinds whose API is not T9k's (AscendJob) are planned in T9k's status shape: ``begin``
translates their status in, the last step (``public``) out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.observe import Observed
from airflow_t9k.controller.reconcile.passstate import PassState, Step, begin, finish_plan, run
from airflow_t9k.controller.reconcile.progress import finish
from airflow_t9k.controller.reconcile.status import StatusBuilder
from airflow_t9k.controller.reconcile.steps import (
    act,
    admit,
    avoid,
    children,
    decide,
    expire,
    finished,
    gates,
    modes,
    record,
    render,
    stall,
    strategy,
    wrap,
)
from airflow_t9k.controller.reconcile.steps.children import SSH_SECRET_STATUS, ssh_secret_recorded
from airflow_t9k.kinds.registry import get_kind

if TYPE_CHECKING:
    from datetime import datetime

    from airflow_t9k.controller.reconcile.actions import Emit, Plan
    from airflow_t9k.kinds.base import Obj

__all__ = ["SSH_SECRET_STATUS", "STEPS", "plan", "rejected", "ssh_secret_recorded"]

STEPS: tuple[Step, ...] = (
    Step("deleting", admit.deleting),  # a job being deleted: nothing to write
    Step("expire", expire.expire),  # a finished job past ttlSecondsAfterFinished is deleted
    Step("legacy", admit.legacy),  # conditions an earlier version wrote, renamed as the seeds name them
    Step("template", admit.resolve_template),  # docs/templates.md
    Step("shape", admit.shape),  # validation; the size Kueue admitted
    Step("observe", admit.observe_replicas),  # each replica's pod and restarts
    Step("finished", finished.finished),  # clean-up only
    Step("avoid", avoid.avoid),  # bad nodes: avoided from now on; failures there spend nothing (docs/disruptions.md)
    Step("strategy", strategy.strategy),  # in place or recreated (docs/disruptions.md)
    Step("render", render.render),  # the pods to create, all at once
    Step("scheduler", modes.scheduler),  # Kueue or not; QueueAdmission
    Step("pause", modes.pause),
    Step("admission", gates.admission),  # Kueue's Workload (docs/queueing.md)
    Step("gang", gates.gang),  # Volcano's PodGroup (AscendJob)
    Step("podgroup", gates.podgroup),  # Kubernetes' own PodGroup: gang scheduling with no add-on
    Step("start", decide.start),  # Debug, the restart budget, startTime
    Step("deadline", decide.deadline),  # activeDeadlineSeconds
    Step("verdict", decide.verdict),  # a kind's verdict, failure rules, success rules
    Step("stall", stall.stall),  # progressDeadlineSeconds: evidence, then a group restart or the end
    Step("children", children.children),  # SSH Secret, ConfigMaps, Services
    Step("end", act.end_job),  # phase, root cause, clean-up (docs/disruptions.md)
    Step("group-restart", act.group_restart),  # fixed-world launches
    Step("replicas", act.replicas),  # create, replace, restart
    Step("failures", record.failures),  # ReplicaFailure
    Step("tasks", record.tasks),  # status.tasks, aggregate, backoffCount
    Step("wake", record.wake),  # the next pass at the deadline, or at the TTL of a job that ends now
    Step("seal", wrap.seal, always=True),
    Step("usage", wrap.usage, always=True),  # docs/usage.md
    Step("progress", wrap.progress, always=True),  # docs/progress.md
    Step("overrun", wrap.overrun, always=True),  # the ETA past the task's deadline: PredictedOverrun
    Step("public", wrap.public, always=True),  # the kind's own status shape
)


def plan(job: Obj, observed: Observed, now: datetime) -> Plan:
    state = run(STEPS, begin(job, observed, now))
    if state.result is None:
        raise RuntimeError("the pass ended without a plan")
    return state.result


def rejected(job: Obj, status: Obj, problems: list[str], now: datetime) -> tuple[Obj, list[Emit]]:
    """The status after the API server refused a child outright (HTTP 400/422).

    The CRD schema keeps pod templates open, so a template the API server can never accept
    is found only when the pod is created; the job fails with that message instead of
    retrying forever.
    """
    kind = get_kind(job["kind"])
    old, status = kind.core_status(job.get("status")), kind.core_status(status) or {}
    sb = StatusBuilder(status, now)
    sb.old = dict(old or {})
    finish(sb, "Failed", "InvalidSpec", "Invalid spec: " + "; ".join(problems))
    state = PassState(kind, job, old, job, job, Observed(), now, sb)
    result = wrap.public_plan(state, finish_plan(sb, [], []))
    return result.status, list(result.events)
