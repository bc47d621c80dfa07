"""One reconcile pass as data: ``PassState`` (the plan so far) and ``Step`` (what changes it).

``plan()`` (reconcile/plan.py) starts a ``PassState`` with ``begin`` and hands it through the
ordered list ``STEPS``; each step is a function ``PassState -> PassState`` in a small module of
``reconcile/steps/``. A step reads what earlier steps found out (the replicas' slots, the pods
to create, the outcome...), adds actions and events, changes the status through ``sb``, and
may end the pass (``end``): the decision steps after it are skipped, and only the steps marked
``always`` (sealing the plan, usage, progress, the kind's own status shape) still run.

``PassState`` is a builder: steps change it in place and return it, so a step's table test
builds one, runs that step alone, and reads the fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import Action, Emit, Plan
from airflow_t9k.controller.reconcile.cleanup import remove_all
from airflow_t9k.controller.reconcile.progress import finish
from airflow_t9k.controller.reconcile.status import FINISHED, StatusBuilder
from airflow_t9k.kinds.registry import get_kind

if TYPE_CHECKING:
    from datetime import datetime

    from airflow_t9k.controller.reconcile.desired import Slot
    from airflow_t9k.controller.reconcile.observe import Observed
    from airflow_t9k.controller.reconcile.slotstate import SlotState
    from airflow_t9k.kinds.base import JobKind, Obj

Outcome = tuple[str, str, str]  # (phase, reason, message) of a job that ends in this pass


@dataclass
class PassState:
    kind: JobKind
    submitted: Obj  # the job as plan() got it, its status in the kind's own shape
    core: Obj | None  # its status in the core's T9k shape (kinds' core_status)
    job: Obj  # the job planned, with the core status; from ``shape`` on, at the size Kueue admitted
    asked: Obj  # the job before Kueue's admitted size: what its Workload asks for
    observed: Observed
    now: datetime
    sb: StatusBuilder
    actions: list[Action] = field(default_factory=list)
    events: list[Emit] = field(default_factory=list)
    requeue_after: float | None = None
    ended: bool = False  # a step decided the pass: the remaining decision steps are skipped
    keep_status: bool = False  # the pass writes the status it found (``sb.old``), not ``sb.new``
    result: Plan | None = None  # the plan, once ``seal`` has run
    # What earlier steps found out.
    slots: list[Slot] = field(default_factory=list)
    states: list[SlotState] = field(default_factory=list)
    rendered: dict[str, Obj] = field(default_factory=dict)  # pod name -> pod to create, this pass
    queued: bool = False  # Kueue admits this job (reconcile/queueing.py)
    debug: bool = False
    budget: list[int] | None = None  # a shared restart budget, spent as restarts are decided
    deadline_in: float | None = None  # seconds until activeDeadlineSeconds passes
    stall_in: float | None = None  # seconds until the job is stalled, or a stall's next step is due (reconcile/stall.py)
    expire_in: float | None = None  # seconds until a finished job's ttlSecondsAfterFinished passes (steps/expire.py)
    group_cause: SlotState | None = None  # the disrupted replica that restarts a fixed-world group
    outcome: Outcome | None = None
    children: list[Action] = field(default_factory=list)  # what ``children`` asked for
    in_place: bool = False  # new pods are built for in-place restarts (reconcile/inplace.py)

    def end(self, keep_status: bool = False) -> PassState:
        self.ended, self.keep_status = True, keep_status
        return self


StepFn = Callable[[PassState], PassState]


@dataclass(frozen=True)
class Step:
    name: str
    run: StepFn
    always: bool = False  # also after a step ended the pass


def begin(job: Obj, observed: Observed, now: datetime) -> PassState:
    kind = get_kind(job["kind"])
    core = kind.core_status(job.get("status"))
    inner = {**job, "status": core}
    return PassState(kind, job, core, inner, inner, observed, now, StatusBuilder(core, now))


def run(steps: tuple[Step, ...], state: PassState) -> PassState:
    for step in steps:
        if step.always or not state.ended:
            state = step.run(state)
    return state


# -- shared by the steps -----------------------------------------------------------------


def invalid(p: PassState, message: str) -> PassState:
    """Fail the job and end the pass; what it created already goes, since nothing useful will run."""
    p.events, p.requeue_after = [], None
    if p.sb.old_phase in FINISHED:
        p.actions = remove_all(p.observed) if failed_invalid(p.sb) else []
        return p.end(keep_status=True)
    finish(p.sb, "Failed", "InvalidSpec", f"Invalid spec: {message}")
    p.actions = remove_all(p.observed)
    return p.end()


def failed_invalid(sb: StatusBuilder) -> bool:
    failed = sb.condition("Failed")
    return sb.old_phase == "Failed" and failed is not None and failed.get("reason") == "InvalidSpec"


def finish_plan(sb: StatusBuilder, actions: list[Action], events: list[Emit], requeue: float | None = None) -> Plan:
    """The plan with ``sb.new``; a phase change is announced by an Event, first."""
    new_phase = sb.new.get("phase")
    if new_phase != sb.old_phase:
        message = phase_message(sb)
        events = [Emit("Warning" if new_phase == "Failed" else "Normal", str(new_phase), message), *events]
    return Plan(tuple(actions), sb.new, tuple(events), requeue)


def phase_message(sb: StatusBuilder) -> str:
    phase = sb.new.get("phase")
    for type_ in ("Failed", "Completed", "Paused"):
        c = sb.condition(type_)
        if c and c["status"] == "True" and phase in ("Failed", "Succeeded", "Paused"):
            return str(c["message"])
    return f"The job is {str(phase).lower()}."


def uid_of(obj: Obj | None) -> str | None:
    return (obj or {}).get("metadata", {}).get("uid")
