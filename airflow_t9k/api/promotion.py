"""Champion and challenger: whether a candidate model replaces the one in production (docs/retraining.md,
"Promotion that cannot race"). Pure.

The champion is kept per production asset in Airflow's asset state store, by the promoting task,
which runs one instance at a time (``PromoteOperator``); this module decides and shapes the
records. A candidate wins when there is no champion, or when it beats the champion's metric by
more than ``min_improvement`` in the better direction. A tie never replaces the champion.

A win by less than ``approve_below`` waits for a person (Airflow's human-in-the-loop): the request
says who beats whom and by how much, and the answer, or the default at the timeout, decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
MAX_HISTORY = 50  # decisions kept beside the champion, the latest
PROMOTE, KEEP = "Promote", "Keep the champion"  # the two answers a person can give


@dataclass(frozen=True)
class Decision:
    promoted: bool
    margin: float | None  # how much better the candidate is (positive: better), None without a champion
    why: str


def metric_of(value: Any, metric: str) -> float:
    """The candidate's metric from a result or metrics dict; a ValueError that says what is wrong."""
    if not isinstance(value, dict):
        raise ValueError(f"the candidate is not a dict of results or metrics: {value!r}")
    if metric not in value:
        raise ValueError(f"the candidate has no metric {metric!r}; it has {sorted(value)}")
    number = value[metric]
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(float(number)):
        raise ValueError(f"the candidate's {metric} is not a finite number: {number!r}")
    return float(number)


def champion_metric(champion: Any) -> float | None:
    """The stored champion's metric, None when there is no usable champion."""
    if not isinstance(champion, dict):
        return None
    value = champion.get("metric")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        return None
    return float(value)


def decide(candidate: float, champion: Any, metric: str, higher_is_better: bool = True,
           min_improvement: float = 0.0) -> Decision:  # fmt: skip
    best = champion_metric(champion)
    if best is None:
        return Decision(True, None, f"no champion yet: {metric} {candidate:.4f} is the first")
    margin = (candidate - best) if higher_is_better else (best - candidate)
    direction = "higher" if higher_is_better else "lower"
    source = (champion or {}).get("run_id") or "the champion"
    if margin > min_improvement:
        return Decision(True, margin, f"{metric} {candidate:.4f} beats {best:.4f} of {source} by {margin:.4g} ({direction} is "
                                      f"better, at least {min_improvement:g} needed)")  # fmt: skip
    return Decision(False, margin, f"{metric} {candidate:.4f} does not beat {best:.4f} of {source} by more than "
                                   f"{min_improvement:g} ({direction} is better; margin {margin:.4g})")  # fmt: skip


def history(before: Any, entry: Obj) -> list[Obj]:
    """The decisions so far with ``entry``, the latest ``MAX_HISTORY``."""
    kept = [e for e in (before if isinstance(before, list) else []) if isinstance(e, dict)]
    return [*kept, entry][-MAX_HISTORY:]


def needs_approval(decision: Decision, approve_below: float | None) -> bool:
    """A win by a margin under ``approve_below`` waits for a person; a first champion never does."""
    return bool(decision.promoted and approve_below is not None and decision.margin is not None
                and decision.margin < approve_below)  # fmt: skip


def approval_request(record: Obj, approve_below: float) -> tuple[str, str]:
    """The subject and body (Markdown) of the human-in-the-loop request for a close win."""
    metric, candidate = record["metric"], record["candidate"]
    subject = f"Promote {record['run_id']}'s model? {metric} {candidate:.4f}, champion {record['champion_before']:.4f}"
    body = (f"The candidate of run `{record['run_id']}` (task `{record['task_id']}`) beats the production model "
            f"by **{record['margin']:.4g}**, under the {approve_below:g} this task promotes without asking.\n\n"
            f"| | {metric} | run |\n|---|---|---|\n"
            f"| candidate | {candidate:.4f} | {record['run_id']} |\n"
            f"| champion | {record['champion_before']:.4f} | {record.get('champion_before_run') or 'unknown'} |\n\n"
            f"Model: `{record.get('model_uri') or 'not given'}`.\n\n"
            f"**{PROMOTE}** replaces the production model; **{KEEP}** skips this promotion.")  # fmt: skip
    return subject, body


def answer(event: Any) -> Obj:
    """What a person (or the timeout's default) answered, from the event the task resumes with."""
    event = event if isinstance(event, dict) else {}
    chosen = event.get("chosen_options") or []
    user = event.get("responded_by_user")
    at = event.get("responded_at")
    return {"chosen": chosen[0] if len(chosen) == 1 else None,
            "by": (user.get("name") or user.get("id")) if isinstance(user, dict) else None,
            "at": at.isoformat() if hasattr(at, "isoformat") else at, "timed_out": bool(event.get("timedout")),
            "error": event.get("error")}  # fmt: skip


def same_champion(champion: Any, record: Obj) -> bool:
    """Whether the champion now is the one the person was asked about (its run and its metric)."""
    run = champion.get("run_id") if isinstance(champion, dict) else None
    return (run, champion_metric(champion)) == (record.get("champion_before_run"), record.get("champion_before"))
