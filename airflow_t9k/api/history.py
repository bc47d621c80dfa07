"""A training task's history across DAG runs (docs/retraining.md, "A task's history"). Pure.

Each try that ends with its job (succeeded or failed) pushes XCom ``t9k_history``: the run's
metrics (the job's last reported metrics, XCom ``metrics``, and the numbers of its result), how long
it ran and waited, its GPU-hours (wasted ones apart), restarts and outcome, and ``best``: for each
metric, the best value of any earlier run and which run had it, carried forward from run to run.
With ``regression_threshold``, a run whose metric fell behind that best by more than the threshold
is flagged (``regressions``): in the task log, as XCom ``regression``, and in the UI's chart. The
UI's History section reads these records from Airflow's database, so they outlive the jobs.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

Obj = dict[str, Any]
HISTORY_KEY = "t9k_history"
REGRESSION_KEY = "regression"
MAX_METRICS = 16  # metrics kept per record, the first ones: a record stays small
DEFAULT_RUNS = 30  # the UI's default window
MAX_RUNS = 500


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        return None
    return float(value)


def values_of(metrics: Any, result: Any) -> dict[str, float]:
    """The run's metrics: the last reported ones, then the result's top-level numbers (a metric the
    program reported wins over a result key of the same name); at most ``MAX_METRICS``."""
    out: dict[str, float] = {}
    for source in (metrics, result):
        if not isinstance(source, dict):
            continue
        for name, value in source.items():
            number = _number(value)
            if number is not None and str(name) not in out and len(out) < MAX_METRICS:
                out[str(name)] = number
    return out


def check_thresholds(value: Any) -> dict[str, float]:
    """``regression_threshold`` as {metric: non-negative number}; a ValueError otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"regression_threshold must be a mapping of metric name to a number, got {value!r}")
    out: dict[str, float] = {}
    for name, threshold in value.items():
        number = _number(threshold)
        if number is None or number < 0:
            raise ValueError(f"regression_threshold[{name!r}] must be a non-negative number, got {threshold!r}")
        out[str(name)] = number
    return out


def _better(a: float, b: float, lower: bool) -> bool:
    return a < b if lower else a > b


def best_of(before: Any) -> dict[str, Obj]:
    """The well-formed part of an earlier record's ``best``."""
    out: dict[str, Obj] = {}
    for name, entry in (before if isinstance(before, dict) else {}).items():
        if isinstance(entry, dict) and _number(entry.get("value")) is not None:
            out[str(name)] = {"value": float(entry["value"]), "run_id": str(entry.get("run_id") or "")}
    return out


def regressions(values: Mapping[str, float], best: Mapping[str, Obj], thresholds: Mapping[str, float],
                lower_is_better: Collection[str] = ()) -> list[Obj]:  # fmt: skip
    """The metrics with a threshold that fell behind the best earlier value by more than it."""
    out = []
    for name, threshold in thresholds.items():
        if name not in values or name not in best:
            continue
        lower = name in lower_is_better
        behind = (values[name] - best[name]["value"]) if lower else (best[name]["value"] - values[name])
        if behind > threshold:
            out.append({"metric": name, "value": values[name], "best": best[name]["value"], "best_run": best[name]["run_id"],
                        "behind": round(behind, 6), "threshold": threshold,
                        "direction": "lower is better" if lower else "higher is better"})  # fmt: skip
    return out


def carried(
    best: Mapping[str, Obj], values: Mapping[str, float], run_id: str, lower_is_better: Collection[str] = ()
) -> dict[str, Obj]:
    """``best`` with this run's values where they are better (or new)."""
    out = {k: dict(v) for k, v in best.items()}
    for name, value in values.items():
        if name not in out or _better(value, out[name]["value"], name in lower_is_better):
            out[name] = {"value": value, "run_id": run_id}
    return out


def describe(regression: Obj) -> str:
    return (f"{regression['metric']} {regression['value']:.4g} fell behind the best earlier run's {regression['best']:.4g} "
            f"({regression['best_run']}) by {regression['behind']:.4g}, more than the threshold {regression['threshold']:g} "
            f"({regression['direction']})")  # fmt: skip


def record(phase: Any, values: Mapping[str, float], usage: Any, restarts: int, best: Mapping[str, Obj],
           found: list[Obj], job: Obj) -> Obj:  # fmt: skip
    """What a try pushes as XCom ``t9k_history``."""
    usage = usage if isinstance(usage, dict) else {}
    wasted = sum(float(v) for v in (usage.get("wasted_accelerator_seconds") or {}).values() if _number(v) is not None)
    return {
        "phase": phase, "metrics": dict(values), "restarts": int(restarts),
        "wall_seconds": usage.get("wall_seconds"), "queue_seconds": usage.get("queue_seconds"),
        "accelerator_hours": usage.get("accelerator_hours"), "wasted_hours": round(wasted / 3600, 4),
        "best": dict(best), "regressions": found,
        "job": {k: job.get(k) for k in ("kind", "namespace", "name", "uid")},
    }  # fmt: skip


def _text(value: Any, limit: int = 128) -> str | None:
    return None if value is None else str(value)[:limit]


def for_display(value: Any) -> Obj | None:
    """A stored record as the UI shows it: known fields, typed and bounded (the task's own code can
    push XCom too, so a record is a claim, shown, never acted on); None for anything else."""
    if not isinstance(value, dict):
        return None
    metrics = {str(k)[:64]: float(v) for k, v in (value.get("metrics") or {}).items()
               if _number(v) is not None} if isinstance(value.get("metrics"), dict) else {}  # fmt: skip
    listed = value.get("regressions") if isinstance(value.get("regressions"), list) else []
    found = [{"metric": _text(r.get("metric"), 64), "value": float(r["value"]), "best": float(r["best"]),
              "best_run": _text(r.get("best_run")), "behind": _number(r.get("behind")), "threshold": _number(r.get("threshold"))}
             for r in listed or []
             if isinstance(r, dict) and _number(r.get("value")) is not None and _number(r.get("best")) is not None]  # fmt: skip
    job: Obj = value["job"] if isinstance(value.get("job"), dict) else {}
    return {
        "phase": _text(value.get("phase"), 32), "metrics": dict(list(metrics.items())[:MAX_METRICS]),
        "wall_seconds": _number(value.get("wall_seconds")), "queue_seconds": _number(value.get("queue_seconds")),
        "accelerator_hours": _number(value.get("accelerator_hours")), "wasted_hours": _number(value.get("wasted_hours")),
        "restarts": int(value["restarts"]) if _number(value.get("restarts")) is not None else None,
        "regressions": found[:MAX_METRICS], "job": _text(job.get("name"), 253),
        "task_accelerator_hours": _number(value.get("task_accelerator_hours")),
    }  # fmt: skip
