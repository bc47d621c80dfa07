"""``status.progress``: the latest progress and metrics the job's reporting replica printed.

The I/O layer follows that replica's log (``controller/reports.py``) and hands the values it
parsed (``api/progress.py``) to ``plan`` as ``Observed.report``; this module folds them into the
status, so they are written by the pass's ordinary status PUT (with its resourceVersion) and
never by a second writer.

- **Rate-limited**: new values reach the status at most once per ``Observed.progress_interval``
  seconds per job (``updated`` is when they last did); values that arrive sooner wait, and the
  plan asks to be run again when they are due. The pass that ends the job takes the latest at
  once: it writes anyway.
- **Bounded**: at most ``MAX_METRICS`` named metrics (the parser's), a history of at most
  ``HISTORY_POINTS`` points with at most ``HISTORY_METRICS`` metrics each, and the whole object
  under ``MAX_BYTES`` serialised (the history is thinned until it fits).
- **History for a chart, over the whole run**: the last point is always the latest values; it
  stays, and the next values get a new point, once it is at least ``history.every`` seconds
  after the point before it (otherwise the next values take its place). When the list is full
  every other point goes and ``every`` doubles, so the points stay spread evenly from the
  start of the run to now.
- **ETA** from the step rate over the last few minutes of the history, while the job runs.

A pass where only ``now`` moved changes nothing; a finished job's progress takes only what its
replica printed last (no ETA).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.reconcile.status import FINISHED, timestamp

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.actions import Plan
    from airflow_t9k.controller.reconcile.observe import Observed

Obj = dict[str, Any]

PROGRESS = "progress"
DEFAULT_INTERVAL = 10.0  # seconds between two writes of new values, per job (--progress-interval)
HISTORY_POINTS = 50
HISTORY_METRICS = 8  # per point: the first names in sorted order
MAX_BYTES = 8192  # status.progress serialised, history included
ETA_WINDOW = 300.0  # seconds of history the step rate is measured over
# An ETA past this is no estimate (a rate of 1e-300 epochs a second, printed by the replica):
# none is shown. Without the bound such a rate made the ETA infinite, and every pass of the job
# failed turning it into a whole number of seconds.
MAX_ETA = 10 * 365 * 86400.0
# The report's keys -> status.progress's.
LATEST = (("step", "step"), ("total_steps", "totalSteps"), ("epoch", "epoch"), ("total_epochs", "totalEpochs"))


def _parse(ts: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
    except ValueError:
        return None


def duration(seconds: float) -> str:
    """45s, 12m30s, 2h5m, 3d4h: how ``kubectl get`` shows ages, for the ETA column."""
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s < 600 and s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if (s % 3600) // 60 else f"{s // 3600}h"
    return f"{s // 86400}d{(s % 86400) // 3600}h" if (s % 86400) // 3600 else f"{s // 86400}d"


def latest(report: Obj) -> Obj:
    """The values of a report as ``status.progress`` names them (no history, ETA or times)."""
    values = report.get("values") or {}
    out: Obj = {"replica": str(report.get("replica") or "")}
    for key, name in LATEST:
        if key in values:
            out[name] = values[key]
    if values.get("metrics"):
        out["metrics"] = dict(values["metrics"])
    # How far, from the steps (or epochs) when their total is known, else as the program said
    # (Kubeflow Trainer's progressPercentage); its own ETA waits for progress_status, which
    # prefers the rate the history shows.
    pct = percent(out)
    if pct is None and isinstance(values.get("percent"), (int, float)):
        pct = round(min(max(float(values["percent"]), 0.0), 100.0), 1)
    if pct is not None:
        out["percent"] = pct
    reported = values.get("eta_seconds")
    if (
        isinstance(reported, (int, float))
        and not isinstance(reported, bool)
        and math.isfinite(reported)
        and 0 <= reported <= MAX_ETA
    ):
        out["etaSeconds"] = int(reported)  # an infinite or absurd one is none (it failed every pass of the job)
    if report.get("time"):
        out["reportedAt"] = str(report["time"])
    return out


def percent(values: Obj) -> float | None:
    """How far: steps when the total is known, else epochs; 0 to 100, one decimal."""
    for done, total in (("step", "totalSteps"), ("epoch", "totalEpochs")):
        if done in values and values.get(total):
            return round(min(max(float(values[done]) / float(values[total]) * 100, 0.0), 100.0), 1)
    return None


def summary(values: Obj) -> str:
    """The Progress column: '12% 120/1000', '40% epoch 2/5', 'step 120', 'epoch 2'."""
    pct = values.get("percent")
    head = f"{pct:g}% " if pct is not None else ""
    if "step" in values:
        return head + (f"{values['step']}/{values['totalSteps']}" if "totalSteps" in values else f"step {values['step']}")
    if "epoch" in values:
        return head + f"epoch {values['epoch']:g}" + (f"/{values['totalEpochs']:g}" if "totalEpochs" in values else "")
    return head.strip()


def _point(values: Obj) -> Obj:
    point: Obj = {"time": values.get("reportedAt") or values.get("updated")}
    for key in ("step", "epoch"):
        if key in values:
            point[key] = values[key]
    metrics = values.get("metrics") or {}
    if metrics:
        point["metrics"] = {k: metrics[k] for k in sorted(metrics)[:HISTORY_METRICS]}
    return point


def _thin(points: list[Obj]) -> list[Obj]:
    """Every other point, the first and the last kept."""
    return points[:-1:2] + points[-1:] if len(points) > 2 else points


def history(old: Obj | None, values: Obj, interval: float) -> Obj:
    """``old`` history with the new values' point: appended, or in place of the last point when
    that is less than ``every`` seconds older; thinned (``every`` doubled) when full."""
    points = [p for p in ((old or {}).get("points") or []) if isinstance(p, dict)]
    every = float((old or {}).get("every") or interval or DEFAULT_INTERVAL)
    # The last point is the latest values; it stays (and the new one is appended) once it is
    # ``every`` seconds after the point before it, else the new values take its place.
    last, before = (_parse(points[-1].get("time")), _parse(points[-2].get("time"))) if len(points) > 1 else (None, None)
    if last is not None and before is not None and (last - before).total_seconds() < every:
        points[-1] = _point(values)
    else:
        points.append(_point(values))
    while len(points) > HISTORY_POINTS:
        points, every = _thin(points), every * 2
    return {"every": _tidy(every), "points": points}


def _tidy(x: float) -> int | float:
    return int(x) if float(x).is_integer() else round(x, 3)


def eta_seconds(values: Obj, points: list[Obj]) -> float | None:
    """Seconds left at the step rate (epoch rate without a step total) of the history's last
    ``ETA_WINDOW`` seconds; None when the rate or the total is unknown."""
    for done, total in (("step", "totalSteps"), ("epoch", "totalEpochs")):
        if done not in values or not values.get(total):
            continue
        run = [p for p in points if done in p and _parse(p.get("time")) is not None]
        # Only since the count last went back (a replica restarted from an earlier checkpoint).
        start = len(run) - 1
        while start > 0 and float(run[start - 1][done]) <= float(run[start][done]):
            start -= 1
        run = run[start:]
        if len(run) < 2:
            return None
        stamped = [(t, p) for p in run if (t := _parse(p["time"])) is not None]  # every one of run (filtered above)
        end_t = stamped[-1][0]
        ref_t, ref = next(((t, p) for t, p in stamped[:-1] if (end_t - t).total_seconds() <= ETA_WINDOW), stamped[-2])
        seconds = (end_t - ref_t).total_seconds()
        moved = float(run[-1][done]) - float(ref[done])
        if seconds <= 0 or moved <= 0:
            return None
        try:
            eta = max(float(values[total]) - float(values[done]), 0.0) / (moved / seconds)
        except (ZeroDivisionError, OverflowError):  # a rate that underflows to zero
            return None
        return eta if math.isfinite(eta) and eta <= MAX_ETA else None
    return None


def _size(obj: Obj) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


def progress_status(old: Obj | None, report: Obj, interval: float, now: datetime, running: bool) -> Obj:
    """The new ``status.progress`` for the report's values (rate limit already decided)."""
    values = latest(report)
    reported_eta = values.pop("etaSeconds", None)  # the program's own (Trainer's estimatedRemainingSeconds)
    values["summary"] = summary(values)
    values["updated"] = timestamp(now)
    hist = history((old or {}).get("history"), values, interval)
    eta = eta_seconds(values, hist["points"]) if running else None
    if eta is None and running and reported_eta is not None:
        eta = float(reported_eta)
    if eta is not None:
        values["eta"], values["etaSeconds"] = duration(eta), int(round(eta))
    values["history"] = hist
    while _size(values) > MAX_BYTES and len(hist["points"]) > 2:
        hist["points"], hist["every"] = _thin(hist["points"]), _tidy(float(hist["every"]) * 2)
    if _size(values) > MAX_BYTES:  # long metric names: the history's metrics go
        hist["points"] = [{k: v for k, v in p.items() if k != "metrics"} for p in hist["points"]]
    return values


def _same(old: Obj, new: Obj) -> bool:
    keys = ("replica", "reportedAt", "metrics", "percent") + tuple(name for _, name in LATEST)
    return all(old.get(k) == new.get(k) for k in keys)


def fold(old_status: Obj | None, new_status: Obj, report: Obj | None, interval: float, now: datetime) -> tuple[Obj, float | None]:
    """``new_status`` with ``progress`` brought up to date, and when to plan again for values
    that must wait (None: nothing waits)."""
    old = (old_status or {}).get(PROGRESS)
    old = old if isinstance(old, dict) else None
    phase = new_status.get("phase")
    running = phase == "Running"
    if report is None or not (report.get("values") or {}) or (old is not None and _same(old, latest(report))):
        if old is not None and not running and "eta" in old and phase != (old_status or {}).get("phase"):
            # No ETA once the job stops running; dropped in the pass that changes the phase (it writes anyway).
            return {**new_status, PROGRESS: {k: v for k, v in old.items() if k not in ("eta", "etaSeconds")}}, None
        return new_status, None
    ending = phase in FINISHED and (old_status or {}).get("phase") not in FINISHED
    last = _parse((old or {}).get("updated"))
    waited = (now - last).total_seconds() if last is not None else None
    if waited is not None and 0 <= waited < interval and not ending:
        return new_status, interval - waited
    return {**new_status, PROGRESS: progress_status(old, report, interval, now, running)}, None


def with_progress(job: Obj, old: Obj | None, plan: Plan, observed: Observed, now: datetime) -> Plan:
    """The plan with ``status.progress`` folded in (the pass's step ``progress`` calls this once, on the core
    status ``old``). Not for a job being deleted: its pass writes nothing."""
    if job["metadata"].get("deletionTimestamp") or (observed.report is None and PROGRESS not in (old or {})):
        return plan
    status, wait = fold(old, plan.status, observed.report, observed.progress_interval, now.astimezone(timezone.utc))
    if status is plan.status and wait is None:
        return plan
    requeue = plan.requeue_after if wait is None else (wait if plan.requeue_after is None else min(wait, plan.requeue_after))
    return replace(plan, status=status, requeue_after=requeue)
