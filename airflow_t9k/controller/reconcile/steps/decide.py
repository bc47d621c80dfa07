"""Whether the job ends in this pass: its deadline, a kind's own verdict, its failure and success rules."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile import queueing
from airflow_t9k.controller.reconcile.disruption import group_disruption
from airflow_t9k.controller.reconcile.status import timestamp
from airflow_t9k.kinds import verdict as verdict_
from airflow_t9k.kinds.base import JobKind, Obj, Rule, debug_enabled
from airflow_t9k.kinds.verdict import Ended

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.passstate import Outcome, PassState
    from airflow_t9k.controller.reconcile.slotstate import SlotState

LAST_RESUME = "lastResumeTime"  # status: when the job last resumed; activeDeadlineSeconds counts from here


def start(p: PassState) -> PassState:
    """Debug mode, the shared restart budget, ``startTime`` on the first pass that gets this far, and
    ``lastResumeTime`` on the first pass after a pause or a Kueue eviction (the deadline's clock)."""
    p.debug = debug_enabled(p.job)
    limit = p.kind.backoff_limit(p.job)
    p.budget = None if limit is None else [limit - sum(s.restarts for s in p.states)]
    if "startTime" in p.sb.old and resumed(p):
        p.sb.new[LAST_RESUME] = timestamp(p.now)
    p.sb.new.setdefault("startTime", timestamp(p.now))
    return p


def resumed(p: PassState) -> bool:
    """This pass ends a stop that was not the job's doing: Pause mode was turned off (the pause step
    let the pass through a job still ``Paused``), or Kueue admitted a job it had evicted (the job
    waited with ``Admitted=False``; the admission step let the pass through)."""
    if p.sb.old_phase == "Paused":
        return True
    admitted = next((c for c in p.sb.old.get("conditions") or [] if c.get("type") == queueing.CONDITION), None)
    return p.queued and admitted is not None and admitted.get("status") != "True"


def deadline(p: PassState) -> PassState:
    """``activeDeadlineSeconds`` passed fails the job (not in Debug mode); else when to look again.

    The clock runs from the last resume (``lastResumeTime``), else from ``startTime``: time spent
    paused or evicted and queued again is not running time, as batch/v1 Job and Kubeflow's
    operators restart the timer when a suspended job resumes."""
    limit = p.kind.active_deadline(p.job)
    if not limit:
        return p
    since = p.sb.new.get(LAST_RESUME) or p.sb.new["startTime"]
    begun = datetime.fromisoformat(str(since).replace("Z", "+00:00"))
    left = limit - (p.now - begun).total_seconds()
    p.deadline_in = max(left, 0.0)
    if left <= 0 and not p.debug:
        when = f"since it resumed at {since}" if LAST_RESUME in p.sb.new else f"since it started at {since}"
        p.outcome = ("Failed", "DeadlineExceeded", f"The job ran longer than activeDeadlineSeconds ({limit}s) {when}.")
    return p


def verdict(p: PassState) -> PassState:
    """A kind's own verdict (BeamJob: its submit Job), then failure rules, then success rules (Debug
    mode skips this). A fixed-world launch (MPI, DeepSpeed, ColossalAI) cannot go on with one replica
    replaced: a disruption restarts the whole group, and its launcher's fall is no verdict."""
    p.group_cause = group_disruption(p.states) if p.kind.restarts_as_group and not p.debug else None
    if p.outcome is None and not p.debug and p.group_cause is None:
        p.outcome = p.kind.verdict(p.job, p.observed) or decide(p.kind, p.job, p.states, p.budget)
    return p


def decide(kind: JobKind, job: Obj, states: list[SlotState], budget: list[int] | None) -> Outcome | None:
    """Failure rules, then success rules; a job whose replicas have all ended without satisfying
    a rule fails rather than hanging."""
    succeeded = {(s.slot.type, s.slot.rank) for s in states if s.ended and s.phase == "Succeeded"}
    failed_for_good = {
        (s.slot.type, s.slot.rank) for s in states if s.ended and s.phase == "Failed" and not s.can_restart(budget)
    }
    if rule := satisfied(kind.failure_rules(job), failed_for_good):
        # Seed 001's reasons: the message names the rule, so a "FailureRule" reason added nothing.
        # A kind without such rules names what decided instead (AscendJob: kinds/verdict.py).
        said = kind.rule_verdict(job, "Failed", deciders(states, rule, budget))
        return ("Failed", *said) if said else ("Failed", "Failed", f"The job is failed with rule: {fmt(rule)}")
    if rule := satisfied(kind.success_rules(job), succeeded):
        said = kind.rule_verdict(job, "Succeeded", deciders(states, rule, budget))
        return ("Succeeded", *said) if said else ("Succeeded", "Succeeded",
                                                 f"The job has finished successfully with rule: {fmt(rule)}")  # fmt: skip
    ended = succeeded | failed_for_good
    restartable = any(s.restart_recorded or (s.ended and s.can_restart(budget)) for s in states)
    if states and len(ended) == len(states) and not restartable:
        return "Failed", "NoRuleSatisfied", "All replicas have ended, but no success rule was satisfied."
    return None


def deciders(states: list[SlotState], rule: Rule, budget: list[int] | None) -> list[Ended]:
    """The replicas ``rule`` names, in its order, with why a failed one is not restarted."""
    by_slot = {(s.slot.type, s.slot.rank): s for s in states}
    out = []
    for rtype, ranks in rule.items():
        for rank in ranks:
            s = by_slot.get((rtype, rank))
            if s is None or s.phase not in ("Succeeded", "Failed"):
                continue
            policy = s.slot.spec.restart
            failed = s.phase == "Failed"
            if not failed:
                why = ""
            elif not replace(policy, limit=s.restarts + 1).allows(False, s.restarts, s.exit_code):
                why = verdict_.POLICY  # whatever is left of the limit, the policy does not restart this end
            elif s.restarts >= policy.limit:
                why = verdict_.LIMIT
            elif budget is not None and budget[0] <= 0:
                why = verdict_.BACKOFF
            else:
                why = ""
            out.append(Ended(s.slot.pod_name, rtype, str(s.phase), s.exit_code if failed else None, policy.policy,
                             s.restarts, why))  # fmt: skip
    return out


def satisfied(rules: list[Rule], done: set[tuple[str, int]]) -> Rule | None:
    for rule in rules:
        if all((t, r) in done for t, ranks in rule.items() for r in ranks):
            return rule
    return None


def fmt(rule: Rule) -> str:
    # Seed 001 prints a rule as { "worker": [0] }: spaces inside the braces.
    return "{ " + json.dumps(rule, separators=(", ", ": "))[1:-1] + " }"
