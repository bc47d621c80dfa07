"""Progress and metrics a replica reports on stdout, and how they read back (docs/progress.md).

A training program prints a line with the word ``T9K_PROGRESS`` followed by a JSON object, or
by ``key=value`` pairs::

    T9K_PROGRESS {"step": 120, "total_steps": 1000, "epoch": 2, "loss": 0.31, "metrics": {"acc": 0.9}}
    T9K_PROGRESS step=120 total_steps=1000 epoch=2 loss=0.31 acc=0.9

No client and no credentials in the pod: the controller follows the log of the job's
reporting replica (the one whose success decides it, rank 0) and keeps the latest values in
``status.progress``. The word may stand anywhere in the line (after a logging prefix, a
launcher's ``[rank0]:`` or pdsh's ``host:``); everything else in a log is ignored, and so is a
line that does not parse. Reserved keys: ``step``, ``total_steps``, ``epoch``,
``total_epochs`` (camelCase accepted too); every other number, at the top level or in
``metrics``, is a named metric. A line may carry only some keys: the others keep their last
value.

Pure functions, shared by the controller (``parse_line``, ``merge``), the operator
(``metrics_of``, ``describe``) and the UI.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

Obj = dict[str, Any]

MARKER = "T9K_PROGRESS"
MAX_LINE = 8192  # characters: a longer line is not a report (and is not parsed)
MAX_METRICS = 16  # named metrics kept per job; later names are dropped, the first ones stay
MAX_NAME = 64
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]*")  # fullmatch: "$" would let a name end in a newline
_MARKER = re.compile(r"(?:^|[^A-Za-z0-9_])" + MARKER + r"(?:\s+|$)")
# Reserved keys, as printed (snake_case or camelCase) -> the report's own key.
RESERVED = {"step": "step", "total_steps": "total_steps", "totalSteps": "total_steps", "epoch": "epoch",
            "total_epochs": "total_epochs", "totalEpochs": "total_epochs"}  # fmt: skip
SIGNIFICANT = 6  # digits a metric keeps: status stays small, a chart loses nothing


def _number(value: Any) -> float | None:
    """A finite number (a numeric string too); None for anything else (bool, NaN, inf, text)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def _tidy(number: float) -> int | float:
    """Rounded to SIGNIFICANT digits; a whole number as an int."""
    rounded = float(f"{number:.{SIGNIFICANT}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


def _field(key: str, value: Any) -> int | float | None:
    """A reserved key's value: steps are whole and non-negative (totals positive), epochs
    non-negative numbers (2.5 is half-way through the third); None when it is not one."""
    number = _number(value)
    if number is None or number < 0:
        return None
    if key in ("step", "total_steps"):
        if not number.is_integer() or number >= 2**53 or (key == "total_steps" and number == 0):
            return None
        return int(number)
    if key == "total_epochs" and number == 0:
        return None
    return _tidy(number)


def _pairs(text: str) -> Obj | None:
    """``key=value`` pairs separated by spaces or commas; None when a word is not one."""
    out: Obj = {}
    for word in re.split(r"[\s,]+", text.strip()):
        if not word:
            continue
        key, eq, value = word.partition("=")
        if not eq or not key:
            return None
        out[key] = value
    return out or None


def parse_line(line: str | bytes) -> Obj | None:
    """The report in one log line, or None when the line carries none (or only garbage).

    The report: ``step``, ``total_steps``, ``epoch``, ``total_epochs`` where given and valid,
    and ``metrics`` (name -> number) when any; at least one of them.
    """
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="replace")
    if MARKER not in line or len(line) > MAX_LINE:
        return None
    found = _MARKER.search(line)
    if found is None:
        return None
    rest = line[found.end() :].strip()
    raw: Any
    if rest.startswith("{"):
        try:
            raw, _ = json.JSONDecoder().raw_decode(rest)
        except (ValueError, RecursionError):
            return None
    else:
        raw = _pairs(rest)
    return parse_values(raw)


def parse_values(raw: Any) -> Obj | None:
    """The report in one object of values (a line's JSON or pairs, or a pushed body's): the
    reserved keys where valid, every other finite number a metric; None when nothing is valid."""
    if not isinstance(raw, dict):
        return None
    report: Obj = {}
    metrics: Obj = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            continue
        if key in RESERVED:
            if (number := _field(RESERVED[key], value)) is not None:
                report[RESERVED[key]] = number
        elif key == "metrics" and isinstance(value, dict):
            for name, inner in value.items():
                _add_metric(metrics, name, inner)
        else:
            _add_metric(metrics, key, value)
    if metrics:
        report["metrics"] = metrics
    return report or None


def _add_metric(metrics: Obj, name: Any, value: Any) -> None:
    if not isinstance(name, str) or len(name) > MAX_NAME or not _NAME.fullmatch(name) or name in RESERVED or name == "metrics":
        return
    if len(metrics) >= MAX_METRICS and name not in metrics:
        return
    number = _number(value)
    if number is not None:
        metrics[name] = _tidy(number)


def merge(state: Obj | None, report: Obj) -> Obj:
    """``state`` (the values so far) updated by one report: its keys replace theirs, its
    metrics join the others; at most MAX_METRICS names, the first ones kept."""
    out: Obj = {k: v for k, v in (state or {}).items() if k != "metrics"}
    metrics = dict((state or {}).get("metrics") or {})
    for key, value in report.items():
        if key == "metrics":
            for name, number in value.items():
                if name in metrics or len(metrics) < MAX_METRICS:
                    metrics[name] = number
        else:
            out[key] = value
    if metrics:
        out["metrics"] = metrics
    return out


# -- reading status.progress back (operator, trigger, UI) ------------------------------------


def metrics_of(status: Obj | None) -> Obj:
    """The last values of ``status.progress`` as XCom ``metrics``: the named metrics, with
    ``step``, ``total_steps``, ``epoch`` and ``total_epochs`` where reported; {} when none."""
    progress = (status or {}).get("progress")
    if not isinstance(progress, dict):
        return {}
    out: Obj = {}
    for key, name in (("step", "step"), ("totalSteps", "total_steps"), ("epoch", "epoch"), ("totalEpochs", "total_epochs")):
        if _number(progress.get(key)) is not None:
            out[name] = progress[key]
    metrics = progress.get("metrics")
    if isinstance(metrics, dict):
        out.update({str(k): v for k, v in metrics.items() if _number(v) is not None and str(k) not in RESERVED})
    return out


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def describe(progress: Obj | None) -> str:
    """'step 120/1000 (12%), epoch 2, loss 0.31, acc 0.9, ETA 2m30s' for a task log; '' when
    there is nothing to say."""
    if not isinstance(progress, dict):
        return ""
    parts = []
    if "step" in progress:
        total = f"/{progress['totalSteps']}" if "totalSteps" in progress else ""
        parts.append(f"step {progress['step']}{total}" + (f" ({_fmt(progress['percent'])}%)" if "percent" in progress else ""))
    if "epoch" in progress:
        total = f"/{_fmt(progress['totalEpochs'])}" if "totalEpochs" in progress else ""
        parts.append(
            f"epoch {_fmt(progress['epoch'])}{total}"
            + (f" ({_fmt(progress['percent'])}%)" if "percent" in progress and "step" not in progress else "")
        )
    metrics = progress.get("metrics")
    if isinstance(metrics, dict):
        parts += [f"{k} {_fmt(v)}" for k, v in metrics.items()]
    if progress.get("eta"):
        parts.append(f"ETA {progress['eta']}")
    return ", ".join(parts)


def note(job: Obj | None) -> tuple[str, str] | None:
    """(when, what) of the job's ``status.progress`` for a task-log line as it changes: the
    controller's write time, so each write is logged once; None without progress."""
    progress = ((job or {}).get("status") or {}).get("progress")
    text = describe(progress)
    if not text or progress is None:
        return None
    return str(progress.get("updated") or ""), text
