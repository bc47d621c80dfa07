"""``plan(job, observed, now)``: decide what to create and delete, and what the status is.

The order of decisions, for a job that has not finished:

1. an invalid spec fails the job with a condition naming the problem, and touches nothing;
2. Pause mode deletes every pod (phase ``Paused``);
3. otherwise a kind's own verdict (BeamJob: its submit Job), then failure rules, then
   success rules, are checked against the replicas' outcomes (Debug mode skips this); a
   job whose replicas have all ended without satisfying a rule fails rather than hanging;
4. missing children are created, and failed replicas whose restart policy allows it are
   deleted, to be recreated under the same name by a later pass;
5. a job that just finished applies its clean-up policy.

Kinds whose API is not T9k's (AscendJob) are planned in T9k's status shape: ``plan``
translates their status in and out around the core.

A finished job is only cleaned up; its phase never changes again.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime

from airflow_t9k.controller.reconcile import queueing, template, volcano
from airflow_t9k.controller.reconcile.actions import Action, Create, CreateSSHSecret, Delete, Emit, Patch, Plan
from airflow_t9k.controller.reconcile.cleanup import cleanup, remove_all
from airflow_t9k.controller.reconcile.desired import (
    Slot,
    build_extra,
    build_pod,
    build_service,
    build_ssh_secret,
    check_names,
    scheduler_settings,
    slots,
)
from airflow_t9k.controller.reconcile.disruption import disruption, group_disruption, record, replace_disrupted, restart_group
from airflow_t9k.controller.reconcile.evidence import keep_first
from airflow_t9k.controller.reconcile.observe import Observed, is_deleting
from airflow_t9k.controller.reconcile.progress import finish, progress, replica_failure, root_cause
from airflow_t9k.controller.reconcile.reporting import with_progress
from airflow_t9k.controller.reconcile.slotstate import SlotState, recorded_restarts, slot_state
from airflow_t9k.controller.reconcile.status import (
    FINISHED,
    StatusBuilder,
    aggregate,
    failure_detail,
    replica_entry,
    replica_phase,
    timestamp,
)
from airflow_t9k.controller.reconcile.usage import with_usage
from airflow_t9k.kinds.base import (
    ANNOTATION_RESTARTS,
    InvalidSpec,
    JobKind,
    Obj,
    Rule,
    debug_enabled,
    pause_enabled,
)
from airflow_t9k.kinds.registry import get_kind
from airflow_t9k.kinds.templates import unresolved


def plan(job: Obj, observed: Observed, now: datetime) -> Plan:
    kind = get_kind(job["kind"])
    core = kind.core_status(job.get("status"))
    inner = with_usage(job, core, _plan(kind, {**job, "status": core}, observed, now), observed, now)  # what its pods used
    inner = with_progress(job, core, inner, observed, now)  # what its reporting replica printed (docs/progress.md)
    return _public(kind, job, inner, now, observed)


def _public(kind: JobKind, job: Obj, inner: Plan, now: datetime, observed: Observed) -> Plan:
    """The plan with its status in the kind's own shape (the identity for T9k kinds)."""
    restarting = any(e.reason == "ReplicaRestarting" for e in inner.events)
    status, extra = kind.public_status(job, inner.status, restarting, now, observed)
    if queueing.in_use(job, observed):  # Kueue admits the whole gang: the kind's "not enforced" warning is wrong
        extra = [e for e in extra if e[1] != "GangSchedulingNotEnforced"]
    if not extra and status is inner.status:
        return inner
    return replace(inner, status=status, events=inner.events + tuple(Emit(*e) for e in extra))


SSH_SECRET_STATUS = "sshSecret"  # status key: {name, uid} of the SSH Secret the controller made


def _plan(kind: JobKind, job: Obj, observed: Observed, now: datetime) -> Plan:
    sb = StatusBuilder(job.get("status"), now)
    if job["metadata"].get("deletionTimestamp"):
        return Plan(status=sb.old)
    if unresolved(job):  # its template merged in first, before anything exists (reconcile/template.py)
        step = template.resolve(sb, job, observed, now)
        return step if step.status is sb.old else _finish_plan(sb, [], list(step.events), step.requeue_after)
    template.note(sb, job)
    asked = job  # the Workload asks for this; pods run at the size Kueue admitted
    try:
        kind.validate(job)
        kind.check_allowed(job, observed)
        check_names(kind, job)
        job = queueing.admitted_shape(kind, job, observed)
        slot_list = slots(kind, job)
    except InvalidSpec as exc:
        return _invalid(sb, str(exc), observed)

    recorded = recorded_restarts(sb)
    states = [slot_state(s, observed, recorded) for s in slot_list]
    if sb.old_phase in FINISHED:
        actions = remove_all(observed) if _failed_invalid(sb) else keep_first(job, observed, sb, cleanup(kind, job, observed))
        actions += volcano.finished(observed)
        actions += queueing.finished(job, observed, str(sb.old_phase), _phase_message(sb), now)
        _write_tasks(sb, kind, job, states, finished=True)
        return Plan(tuple(actions), sb.new)

    try:
        # Only pods about to be created are rendered, but all of them at once: on the first
        # pass that is every pod, so a bad variable fails the job before anything exists.
        resumed = sb.condition("Paused") is not None
        inputs = kind.pod_inputs(job, observed)
        rendered = (
            {} if inputs is None else
            {s.slot.pod_name: build_pod(kind, job, s.slot, 0, resumed, inputs) for s in states if s.pod is None}
        )  # fmt: skip
    except InvalidSpec as exc:
        return _invalid(sb, str(exc), observed)

    events: list[Emit] = []
    actions: list[Action] = []
    queued = queueing.in_use(job, observed)
    if not queued:
        _note_scheduler(sb, job, events, queueing.why_not(job, observed))
    if pause_enabled(job):
        actions += [Delete("Pod", n, _uid(p)) for n, p in observed.pods.items() if not is_deleting(p)]
        actions += queueing.released(job, observed) if queued else []
        sb.set_phase("Paused")
        sb.set_condition("Paused", True, "Paused", "The job is paused: all replicas have been deleted or are being deleted.")
        sb.set_condition("Running", False, "Paused", "The job is paused.")
        _write_tasks(sb, kind, job, states, finished=True)
        return _finish_plan(sb, actions, events)

    if queued:
        # No pod before Kueue admits the Workload; an eviction deletes them without spending restarts.
        try:
            admission = queueing.gate(kind, asked, observed, sb)
        except InvalidSpec as exc:
            return _invalid(sb, str(exc), observed)
        events += admission.events
        if not admission.admitted:
            _write_tasks(sb, kind, job, states, finished=False)
            return _finish_plan(sb, list(admission.actions), events, admission.requeue_after)
        for s in states:
            if s.slot.pod_name in rendered:
                queueing.place(rendered[s.slot.pod_name], admission.assignments.get(s.slot.type), observed.flavors)
    gang_actions, hold = volcano.gate(kind, job, observed, queued, rendered)
    actions += gang_actions
    if hold:  # Volcano has not taken the PodGroup in: no pod yet, as MindCluster's operator waits
        rendered = {}

    debug = debug_enabled(job)
    budget = _budget(kind, job, states)
    sb.new.setdefault("startTime", timestamp(now))
    expired, requeue = _deadline(kind, job, sb, now)
    group_cause = group_disruption(states) if kind.restarts_as_group and not debug else None
    if expired and not debug:
        outcome: tuple[str, str, str] | None = (
            "Failed",
            "DeadlineExceeded",
            f"The job ran longer than activeDeadlineSeconds ({kind.active_deadline(job)}s).",
        )
    else:
        # A fixed-world launch (MPI, DeepSpeed, ColossalAI) cannot go on with one replica
        # replaced: a disruption restarts the whole group, and its launcher's fall is no verdict.
        outcome = None if debug or group_cause else (kind.verdict(job, observed) or _decide(kind, job, states, budget))
    children = _ensure_children(kind, job, observed, slot_list)
    actions += children
    if outcome is not None:
        phase, reason, message = outcome
        finish(sb, phase, reason, message)
        if phase == "Failed":
            root_cause(sb, states)
        actions += keep_first(job, observed, sb, cleanup(kind, job, observed)) + volcano.finished(observed)
        actions += queueing.finished(job, observed, phase, message, now) if queued else []
    elif group_cause:
        actions += restart_group(sb, observed, group_cause, events)
        progress(sb, states, children_missing=True)
    else:
        actions += _replicas(sb, kind, job, observed, states, rendered, events, debug, budget)
        progress(sb, states, children_missing=any(not isinstance(a, Delete) for a in children))
    replica_failure(sb, states)
    _write_tasks(sb, kind, job, states, finished=outcome is not None)
    if kind.backoff_limit(job) is not None:
        sb.new["backoffCount"] = sum(s.restarts for s in states)
    if outcome is None and requeue is not None:
        return _finish_plan(sb, actions, events, requeue)
    return _finish_plan(sb, actions, events)


# -- decisions ------------------------------------------------------------------------


def _budget(kind: JobKind, job: Obj, states: list[SlotState]) -> list[int] | None:
    """What is left of a shared restart budget (a one-element list, spent as restarts happen)."""
    limit = kind.backoff_limit(job)
    return None if limit is None else [limit - sum(s.restarts for s in states)]


def _deadline(kind: JobKind, job: Obj, sb: StatusBuilder, now: datetime) -> tuple[bool, float | None]:
    """(deadline passed, seconds until it passes)."""
    limit = kind.active_deadline(job)
    if not limit:
        return False, None
    start = datetime.fromisoformat(str(sb.new["startTime"]).replace("Z", "+00:00"))
    left = limit - (now - start).total_seconds()
    return left <= 0, max(left, 0.0)


def _decide(kind: JobKind, job: Obj, states: list[SlotState], budget: list[int] | None) -> tuple[str, str, str] | None:
    succeeded = {(s.slot.type, s.slot.rank) for s in states if s.ended and s.phase == "Succeeded"}
    failed_for_good = {
        (s.slot.type, s.slot.rank) for s in states if s.ended and s.phase == "Failed" and not s.can_restart(budget)
    }
    if rule := _satisfied(kind.failure_rules(job), failed_for_good):
        # Seed 001's reasons: the message names the rule, so a "FailureRule" reason added nothing.
        return "Failed", "Failed", kind.outcome_message(job, "Failed") or f"The job is failed with rule: {_fmt(rule)}"
    if rule := _satisfied(kind.success_rules(job), succeeded):
        return (
            "Succeeded",
            "Succeeded",
            kind.outcome_message(job, "Succeeded") or f"The job has finished successfully with rule: {_fmt(rule)}",
        )
    ended = succeeded | failed_for_good
    restartable = any(s.restart_recorded or (s.ended and s.can_restart(budget)) for s in states)
    if states and len(ended) == len(states) and not restartable:
        return "Failed", "NoRuleSatisfied", "All replicas have ended, but no success rule was satisfied."
    return None


def _satisfied(rules: list[Rule], done: set[tuple[str, int]]) -> Rule | None:
    for rule in rules:
        if all((t, r) in done for t, ranks in rule.items() for r in ranks):
            return rule
    return None


def _fmt(rule: Rule) -> str:
    # Seed 001 prints a rule as { "worker": [0] }: spaces inside the braces.
    return "{ " + json.dumps(rule, separators=(", ", ": "))[1:-1] + " }"


# -- actions --------------------------------------------------------------------------


def ssh_secret_recorded(job: Obj, name: str) -> bool:
    """Whether the job's status records that the controller created its SSH Secret ``name``.

    The controller does not watch or read Secrets (it may only create them: deploy/rbac-*.yaml),
    so this record, written right after the create, is how a pass knows the Secret is there.
    """
    record = (job.get("status") or {}).get(SSH_SECRET_STATUS)
    return isinstance(record, dict) and record.get("name") == name and bool(record.get("uid"))


def _ensure_children(kind: JobKind, job: Obj, observed: Observed, slot_list: list[Slot]) -> list[Action]:
    actions: list[Action] = []
    secret = kind.ssh_secret_name(job)
    if secret and not ssh_secret_recorded(job, secret):
        actions.append(CreateSSHSecret(build_ssh_secret(job, secret)))
    for extra in kind.extra_children(job, observed):
        existing = observed.of_kind(extra["kind"]).get(extra["metadata"]["name"])
        if existing is None:
            actions.append(Create(build_extra(job, extra)))
        elif extra["kind"] == "ConfigMap" and existing.get("data") != extra.get("data") and not is_deleting(existing):
            # e.g. a hostfile after the workers were rescaled
            actions.append(Patch("ConfigMap", extra["metadata"]["name"], {"data": extra.get("data")}))
    wanted = set()
    for slot in slot_list:
        if kind.wants_services(job, slot.type):
            svc = build_service(kind, job, slot)
            wanted.add(svc["metadata"]["name"])
            if svc["metadata"]["name"] not in observed.services:
                actions.append(Create(svc))
    actions += [Delete("Service", n, _uid(s)) for n, s in observed.services.items() if n not in wanted]
    return actions


def _replicas(
    sb: StatusBuilder,
    kind: JobKind,
    job: Obj,
    observed: Observed,
    states: list[SlotState],
    rendered: dict[str, Obj],
    events: list[Emit],
    debug: bool,
    budget: list[int] | None,
) -> list[Action]:
    actions: list[Action] = []
    wanted = {s.slot.pod_name for s in states}
    for s in states:
        if s.pod is not None and disruption(s.pod) is not None:
            actions += replace_disrupted(sb, s, events)
            continue
        if s.pod is None:
            pod = rendered.get(s.slot.pod_name)
            if pod is None:  # waiting for what pod_inputs needs
                continue
            pod["metadata"]["annotations"][ANNOTATION_RESTARTS] = str(s.restarts)
            actions.append(Create(pod))
            s.creating = True
            continue
        if s.phase in ("Pending", "Running") and kind.outdated(job, s.slot.spec, s.slot.rank, s.pod):
            # Not a failure: the pod was built for an older shape of the job (e.g. a hostfile
            # before a rescale). It comes back under the same name; no restart is spent.
            actions.append(Delete("Pod", s.slot.pod_name, _uid(s.pod)))
            events.append(Emit("Normal", "ReplicaRecreated", f"Replica {s.slot.pod_name} is recreated for the job's new shape."))
            continue
        if s.restart_recorded:
            actions.append(Delete("Pod", s.slot.pod_name, _uid(s.pod)))
            continue
        if debug or not s.ended:
            continue
        policy = s.slot.spec.restart
        if s.can_restart(budget):
            s.restarts += 1
            if budget is not None:
                budget[0] -= 1
            actions.append(Delete("Pod", s.slot.pod_name, _uid(s.pod)))
            what = "failed with " + failure_detail(s.pod) if s.phase == "Failed" else "completed"
            record(sb, s.slot.pod_name, _uid(s.pod) or "", what, counted=True, exit_code=s.exit_code)
            events.append(
                Emit("Warning" if s.phase == "Failed" else "Normal", "ReplicaRestarting",
                     f"Replica {s.slot.pod_name} {what}; restarting ({s.restarts}/{policy.limit}, policy {policy.policy}).")
            )  # fmt: skip
    # Pods of replicas that no longer exist in the spec (e.g. replicas lowered).
    actions += [Delete("Pod", n, _uid(p)) for n, p in observed.pods.items() if n not in wanted and not is_deleting(p)]
    return actions


# -- status ---------------------------------------------------------------------------


def _invalid(sb: StatusBuilder, message: str, observed: Observed) -> Plan:
    """Fail the job; what it created already goes, since nothing useful will run."""
    if sb.old_phase in FINISHED:
        return Plan(tuple(remove_all(observed)) if _failed_invalid(sb) else (), sb.old)
    finish(sb, "Failed", "InvalidSpec", f"Invalid spec: {message}")
    return _finish_plan(sb, remove_all(observed), [])


def _failed_invalid(sb: StatusBuilder) -> bool:
    failed = sb.condition("Failed")
    return sb.old_phase == "Failed" and bool(failed) and failed.get("reason") == "InvalidSpec"


def _note_scheduler(sb: StatusBuilder, job: Obj, events: list[Emit], why: str) -> None:
    sched = scheduler_settings(job)
    if not sched:
        return
    message = (
        f"spec.scheduler.t9kScheduler (queue {sched['queue']!r}, priority {sched['priority']}) "
        "is recorded on the pods, but this cluster has no T9k Scheduler: queue admission and priority are not "
        f"enforced and pods use the default scheduler. No Kueue admission either: {why} (docs/queueing.md)."
    )
    if sb.set_condition("QueueAdmission", False, "NotEnforced", message):
        events.append(Emit("Warning", "QueueNotEnforced", message))


def _write_tasks(sb: StatusBuilder, kind: JobKind, job: Obj, states: list[SlotState], finished: bool) -> None:
    tasks: list[Obj] = []
    entries: list[Obj] = []
    decisive = kind.decisive_replica(job)  # its termination message is the job's result
    previous = {e.get("name"): e.get("containers") for t in sb.old.get("tasks") or [] for e in t.get("status") or []}
    for s in states:
        phase = replica_phase(s.pod, s.creating, deleted=finished)
        entry = replica_entry(s.slot.pod_name, s.pod, phase, s.restarts, message=(s.slot.type, s.slot.rank) == decisive)
        if finished and s.phase is None and previous.get(s.slot.pod_name):
            entry["containers"] = previous[s.slot.pod_name]  # cleaned up: how it ended stays on record
        entries.append(entry)
        if not tasks or tasks[-1]["type"] != s.slot.type:
            tasks.append({"type": s.slot.type, "restartCount": 0, "status": []})
        tasks[-1]["status"].append(entry)
        tasks[-1]["restartCount"] += s.restarts
    sb.new["tasks"] = tasks
    sb.new["aggregate"] = aggregate(entries)
    sb.new.update(kind.status_extra(job, sb.new["aggregate"]["running"]))
    generation = job["metadata"].get("generation")
    if generation is not None:
        sb.new["observedGeneration"] = generation


def _finish_plan(sb: StatusBuilder, actions: list[Action], events: list[Emit], requeue: float | None = None) -> Plan:
    new_phase = sb.new.get("phase")
    if new_phase != sb.old_phase:
        message = _phase_message(sb)
        events.insert(0, Emit("Warning" if new_phase == "Failed" else "Normal", str(new_phase), message))
    return Plan(tuple(actions), sb.new, tuple(events), requeue)


def _phase_message(sb: StatusBuilder) -> str:
    phase = sb.new.get("phase")
    for type_ in ("Failed", "Completed", "Paused"):
        c = sb.condition(type_)
        if c and c["status"] == "True" and phase in ("Failed", "Succeeded", "Paused"):
            return str(c["message"])
    return f"The job is {str(phase).lower()}."


def _uid(obj: Obj) -> str | None:
    return obj.get("metadata", {}).get("uid")


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
    result = _public(kind, job, _finish_plan(sb, [], []), now, Observed())
    return result.status, list(result.events)
