"""Hang detection (issue 47, item 1): a running job whose replicas report no progress for
``progressDeadlineSeconds`` is stalled.

Progress is a ``T9K_PROGRESS`` line of the reporting replica or a push from any replica
(docs/progress.md): the time of ``Observed.report``, or ``status.progress.reportedAt`` when this
controller has read nothing newer. The silence runs from the latest of that report, the job's
last restart of any replica (``status.restartHistory``: a restarted program needs time before it
reports again) and its last resume (``status.lastResumeTime``), and never from before this
controller began to listen (``Observed.progress_since``): a controller that was down must not
take its own deafness for a hang. A job that has never reported is never judged: nothing says
it should have by now.

Decide durably, then act, over passes (a pass's status is written before its actions):

1. **Decision**: ``status.stall`` (the silence's start as its key, when, the last report and who
   sent it, what follows: ``Restart`` or ``Fail``), condition ``Stalled`` true, a Warning Event
   ``Stalled``; the one action: every replica's last log lines and state into ``<job>-evidence``.
2. Once that evidence is observed (or could not be written for ``GRACE`` seconds), **Restart**:
   one restart counted (the reporting replica's count and limit, and the job's ``backoffLimit``),
   a ``restartHistory`` entry with reason ``ProgressDeadlineExceeded``, and ``restartedAt`` and
   the pods' uids in ``status.stall``; then every replica restarts, in place where its pod was
   built for it (its agent is asked: reconcile/inplace.py), else deleted and created again.
   Or **Fail**: the job fails with reason ``ProgressDeadlineExceeded`` (its clean-up policy applies).
3. Later passes finish a restart on record (uid preconditions; the in-place request once per
   key), so a pass repeated after a crash does nothing twice. A report after the restart clears
   ``Stalled``; another deadline of silence after it is a new stall.

A report, a restart or a resume before step 2 ends the stall with nothing restarted. Pure: the
step that calls this is steps/stall.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import Action, Delete, Emit
from airflow_t9k.controller.reconcile.disruption import HISTORY, record
from airflow_t9k.controller.reconcile.evidence import GRACE, evidence_name, keep_stall, stall_kept
from airflow_t9k.controller.reconcile.inplace import can_restart_in_place, restart_in_place
from airflow_t9k.controller.reconcile.observe import is_deleting
from airflow_t9k.controller.reconcile.passstate import uid_of
from airflow_t9k.controller.reconcile.status import timestamp
from airflow_t9k.kinds.base import UNLIMITED

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.observe import Observed
    from airflow_t9k.controller.reconcile.passstate import PassState
    from airflow_t9k.controller.reconcile.slotstate import SlotState
    from airflow_t9k.controller.reconcile.status import StatusBuilder
    from airflow_t9k.kinds.base import Obj

STALLED = "Stalled"  # the condition
REASON = "ProgressDeadlineExceeded"
RECORD = "stall"  # status.stall: the last stall
KEY_PREFIX = "stall/"
# The clock's moments are stamped to the second (a log line's report, a status timestamp): the
# silence began up to a second after its stamp, so the deadline counts from the stamp's end and
# a stall is never judged early (measured: up to 0.4 s early before; benchmarks/hang_detection.py).
STAMP = timedelta(seconds=1)  # its restartHistory key, and the cause its in-place requests carry


def parse(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Clock:
    report: datetime  # the last report
    replica: str  # the replica that sent it
    quiet: datetime  # the silence's start: the latest of the report, a restart, a resume
    start: datetime  # where the deadline counts from: ``quiet``, or when this controller began to listen


def clock(sb: StatusBuilder, observed: Observed) -> Clock | None:
    """The silence so far; None for a job that has never reported."""
    reports = []
    if observed.report is not None and (t := parse(observed.report.get("time"))) is not None:
        reports.append((t, str(observed.report.get("replica") or "")))
    progress = sb.new.get("progress")
    if isinstance(progress, dict) and (t := parse(progress.get("reportedAt"))) is not None:
        reports.append((t, str(progress.get("replica") or "")))
    if not reports:
        return None
    report, replica = max(reports, key=lambda r: r[0])
    history = [e for e in sb.new.get(HISTORY) or [] if isinstance(e, dict)]
    moments = [report, parse(sb.new.get("lastResumeTime")), *(parse(e.get("time")) for e in history)]
    quiet = max(m for m in moments if m is not None)
    since = observed.progress_since
    return Clock(report, replica, quiet, quiet if since is None or since < quiet else since)


def record_of(sb: StatusBuilder) -> Obj | None:
    rec = sb.new.get(RECORD)
    return rec if isinstance(rec, dict) and rec.get("key") else None


def settled(states: list[SlotState], budget: list[int] | None) -> bool:
    """Every replica runs, or ended with no restart to come; none is being created, restarted or
    replaced: those take their own course first (and a restart starts the silence again)."""
    running = False
    for s in states:
        if s.pod is None or s.creating or s.restart_recorded or s.in_place or s.disrupted:
            return False
        if s.phase == "Running":
            running = True
        elif not (s.ended and not s.can_restart(budget)):
            return False
    return running


def counted_state(p: PassState) -> SlotState:
    """The replica a stall's restart is counted against: the reporting one (docs/progress.md)."""
    decisive = p.kind.decisive_replica(p.job)
    name = p.kind.pod_name(p.job, *decisive) if decisive is not None else None
    return next((s for s in p.states if s.slot.pod_name == name), p.states[0])


def refused(states: list[SlotState], counted: SlotState, budget: list[int] | None) -> str | None:
    """Why the job's restart policy or budget allows no group restart; None when it does. A hang is
    treated as a failure without an exit code: every replica's policy must restart failures."""
    for s in states:
        policy = s.slot.spec.restart
        if policy.policy == "Never" or policy.limit <= 0:
            return f"replica {s.slot.pod_name}'s restart policy ({policy.policy}, limit {policy.limit}) restarts no failure"
    limit = counted.slot.spec.restart.limit
    if counted.restarts >= limit:
        return f"replica {counted.slot.pod_name} has used its {limit} restart(s)"
    if budget is not None and budget[0] <= 0:
        return "the job's restart budget (backoffLimit) is spent"
    return None


def head(rec: Obj) -> str:
    who = f" from replica {rec['lastReplica']}" if rec.get("lastReplica") else ""
    return (f"No replica reported progress for {rec['deadlineSeconds']}s (progressDeadlineSeconds) since {rec['key']}; "
            f"the last report was at {rec['lastReportAt']}{who}.")  # fmt: skip


def judge(p: PassState, c: Clock, limit: int) -> PassState:
    """Stalled once the deadline has passed since the silence began; else woken at the deadline."""
    if not p.observed.progress_heard:  # its reports cannot reach this controller now: silence means nothing
        return p
    left = (c.start + timedelta(seconds=limit) + STAMP - p.now).total_seconds()
    if left > 0:
        p.stall_in = left
        return p
    if settled(p.states, p.budget):
        decide(p, c, limit)
    return p


def decide(p: PassState, c: Clock, limit: int) -> None:
    """Step 1: the decision on record, the Event, and the evidence asked for."""
    why = refused(p.states, counted_state(p), p.budget)
    rec: Obj = {"key": timestamp(c.quiet), "decidedAt": timestamp(p.now), "lastReportAt": timestamp(c.report),
                "lastReplica": c.replica, "deadlineSeconds": limit, "action": "Fail" if why else "Restart"}  # fmt: skip
    if why:
        rec["refused"] = why
    p.sb.new[RECORD] = rec
    then = f"failing the job: {why}." if why else "restarting every replica."
    message = f"{head(rec)} Keeping the replicas' last log lines in {evidence_name(p.job)}, then {then}"
    p.sb.set_condition(STALLED, True, REASON, message)
    p.events.append(Emit("Warning", STALLED, message))
    p.actions.append(keep_stall(p.job, p.observed, p.sb, rec))
    p.stall_in = GRACE  # goes on without the evidence if it cannot be written


def pending(p: PassState, rec: Obj, c: Clock, limit: int) -> PassState:
    """Step 2, once the evidence is kept: the restart, or the job's failure."""
    began = parse(rec["key"]) or c.quiet
    if c.quiet > began:  # reported (or restarted, resumed) since: the silence is over
        what = (f"replica {c.replica} reported progress at {timestamp(c.report)}" if c.report > began
                else f"the job restarted or resumed at {timestamp(c.quiet)}")  # fmt: skip
        resolve(p, rec, "ProgressResumed", f"The stall since {rec['key']} is over before anything restarted: {what}.")
        return judge(p, c, limit)
    waited = (p.now - (parse(rec.get("decidedAt")) or p.now)).total_seconds()
    if not stall_kept(p.job, p.observed, str(rec["key"])) and waited < GRACE:
        p.actions.append(keep_stall(p.job, p.observed, p.sb, rec))  # asked again until observed
        p.stall_in = GRACE - waited
        return p
    if not settled(p.states, p.budget):
        return p
    counted = counted_state(p)
    why = refused(p.states, counted, p.budget) if rec.get("action") == "Restart" else rec.get("refused")
    if why is None:
        restart(p, rec, counted)
    else:
        p.outcome = ("Failed", REASON, f"The job stalled. {head(rec)} No restart: {why}.")
    return p


def restart(p: PassState, rec: Obj, counted: SlotState) -> None:
    """Step 2's restart: counted and on record, then every replica's restart asked for."""
    counted.restarts += 1
    if p.budget is not None:
        p.budget[0] -= 1
    live = {n: pod for n, pod in p.observed.pods.items() if not is_deleting(pod)}
    in_place = [n for n, pod in live.items() if can_restart_in_place(pod)]
    rec.update(restartedAt=timestamp(p.now), counted=counted.slot.pod_name, pods={n: uid_of(pod) for n, pod in live.items()})
    cause = f"{REASON}: {head(rec)}"
    record(p.sb, f"{counted.slot.pod_name} (whole group)", KEY_PREFIX + str(rec["key"]), cause, counted=True,
           in_place=bool(in_place), reason=REASON)  # fmt: skip
    policy = counted.slot.spec.restart
    count = f"{counted.restarts}, no limit" if policy.limit >= UNLIMITED else f"{counted.restarts}/{policy.limit}"
    how = (
        "in place"
        if len(in_place) == len(live)
        else f"{len(in_place)} in place, the others recreated"
        if in_place
        else "recreated"
    )
    left = f"; {p.budget[0]} left of the job's backoffLimit" if p.budget is not None else ""
    p.events.append(Emit("Warning", "StallRestarting",
                         f"Every replica restarts after the stall since {rec['key']} ({how}); the restart is counted "
                         f"against replica {counted.slot.pod_name} ({count}, policy {policy.policy}{left})."))  # fmt: skip
    p.sb.set_condition(STALLED, True, REASON, f"{head(rec)} Every replica was restarted at {rec['restartedAt']}; "
                                              "waiting for a report.")  # fmt: skip
    p.actions += finish_restart(p, rec)


def finish_restart(p: PassState, rec: Obj) -> list[Action]:
    """What is left of the restart on record: each recorded pod still there asked to restart in
    place (once per key), or deleted by its uid; nothing once every one was."""
    key, counted = KEY_PREFIX + str(rec["key"]), rec.get("counted")
    count = next((s.restarts for s in p.states if s.slot.pod_name == counted), None)
    out: list[Action] = []
    for name, uid in (rec.get("pods") or {}).items():
        pod = p.observed.pods.get(name)
        if pod is None or uid_of(pod) != uid or is_deleting(pod):
            continue  # gone or replaced: restarted
        if can_restart_in_place(pod):
            asked = restart_in_place(pod, key, count if name == counted else None)
            out += [asked] if asked is not None else []
        else:  # not built for it, or ended before its agent could restart it: recreated
            out.append(Delete("Pod", name, uid))
    return out


def restarting(p: PassState, rec: Obj, c: Clock, limit: int) -> PassState:
    """Step 3: the restart finished; ``Stalled`` cleared by a report after it, or a new stall."""
    left = finish_restart(p, rec)
    p.actions += left
    restarted = parse(rec.get("restartedAt")) or c.report
    if c.report > restarted:
        after = f"after the restart at {rec['restartedAt']}"
        resolve(p, rec, "ProgressResumed", f"Replica {c.replica} reported progress at {timestamp(c.report)}, {after}.")
    elif left:
        return p
    return judge(p, c, limit)


def resolve(p: PassState, rec: Obj, reason: str, message: str) -> None:
    rec["resolvedAt"] = timestamp(p.now)
    p.sb.set_condition(STALLED, False, reason, message)
    p.events.append(Emit("Normal", reason, message))
