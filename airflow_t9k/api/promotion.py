"""Champion and challenger: whether a candidate model replaces the one in production (docs/retraining.md,
"Promotion that cannot race"). Pure.

The champion is kept per production asset in Airflow's asset state store, by the promoting task,
which runs one instance at a time (``PromoteOperator``); this module decides and shapes the
records. A candidate wins when there is no champion, or when it beats the champion's metric by
more than ``min_improvement`` in the better direction. A tie never replaces the champion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
MAX_HISTORY = 50  # decisions kept beside the champion, the latest


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
