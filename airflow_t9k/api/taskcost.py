"""What a task instance cost over all its tries and re-runs: one number for "what did this night's
retraining cost" (docs/usage.md, "A task's cost across tries").

Each try that ends with a job adds that job's usage (XCom ``usage``'s totals, ``api/outcome.usage_of``)
to the key ``t9k_cost`` of Airflow's task state store, which retries and Clears of the task
instance share, keyed by the job's uid: a retry that delivers again the job an earlier try
delivered, or reattaches to it, replaces that job's entry instead of counting it twice. The sum
goes into XCom ``usage`` as ``task_total``. Pure.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
COST_KEY = "t9k_cost"
MAX_JOBS = 100  # the last jobs kept: a task re-run more often than this sums its latest
SCALARS = ("cpu_seconds", "wall_seconds", "queue_seconds", "runs")
PER_RESOURCE = ("accelerator_seconds", "wasted_accelerator_seconds")


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0.0


def _entry(value: Any) -> Obj | None:
    """A stored entry, its numbers checked (the task's own code may write the store too), or None."""
    if not isinstance(value, dict) or not isinstance(value.get("uid"), str) or not value["uid"]:
        return None
    if isinstance(value.get("try"), bool) or not isinstance(value.get("try"), int):
        return None
    out: Obj = {"uid": value["uid"], "try": value["try"]}
    for key in SCALARS:
        if key in value:
            out[key] = _number(value[key])
    for key in PER_RESOURCE:
        given = value.get(key)
        out[key] = {str(k): _number(v) for k, v in given.items()} if isinstance(given, dict) else {}
    return out


def parse(value: Any) -> list[Obj]:
    """The well-formed entries of a stored record, in the order the jobs ended."""
    return [e for e in (_entry(v) for v in (value if isinstance(value, list) else [])) if e is not None]


def record(history: Any, try_number: int, uid: str, usage: Obj) -> list[Obj]:
    """``history`` with the job ``uid``'s usage as try ``try_number`` saw it at its end."""
    entry = _entry({**{k: usage[k] for k in (*SCALARS, *PER_RESOURCE) if k in usage}, "uid": uid, "try": int(try_number)})
    kept = [e for e in parse(history) if e["uid"] != uid]
    return [*kept, *([entry] if entry else [])][-MAX_JOBS:]


def _tidy(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 3)


def total(history: Any) -> Obj:
    """The sum over every job of the record: per resource, the scalars, ``accelerator_hours``, and
    which tries (``tries``) ran how many jobs (``jobs``)."""
    entries = parse(history)
    out: Obj = {"jobs": len(entries), "tries": sorted({e["try"] for e in entries})}
    for key in PER_RESOURCE:
        summed: dict[str, float] = {}
        for e in entries:
            for name, seconds in e[key].items():
                summed[name] = summed.get(name, 0.0) + seconds
        out[key] = {k: _tidy(v) for k, v in summed.items()}
    for key in SCALARS:
        out[key] = _tidy(sum(e.get(key, 0.0) for e in entries))
    out["accelerator_hours"] = round(sum(out["accelerator_seconds"].values()) / 3600, 4)
    return out


def describe(totals: Obj) -> str:
    """'2 jobs over tries 1, 2: nvidia.com/gpu 1.5 h (0.2 h wasted), 5400 cpu-s, wall 3600 s, queued 120 s'."""
    wasted = totals.get("wasted_accelerator_seconds") or {}
    parts = [f"{name} {float(sec) / 3600:.4g} h" + (f" ({float(wasted[name]) / 3600:.4g} h wasted)" if wasted.get(name) else "")
             for name, sec in (totals.get("accelerator_seconds") or {}).items()]  # fmt: skip
    parts += [f"{totals.get('cpu_seconds', 0)} cpu-s", f"wall {totals.get('wall_seconds', 0)} s",
              f"queued {totals.get('queue_seconds', 0)} s"]  # fmt: skip
    tries = ", ".join(str(t) for t in totals.get("tries") or [])
    jobs = totals.get("jobs", 0)
    return f"{jobs} job{'s' if jobs != 1 else ''} over tr{'ies' if len(totals.get('tries') or []) != 1 else 'y'} {tries}: " + (
        ", ".join(parts)
    )
