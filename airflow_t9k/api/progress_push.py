"""What a replica POSTs to the controller's progress endpoint (docs/progress.md, "The push path").

Two bodies are accepted, both JSON objects:

- **Kubeflow Trainer's** (v2.2, KEP-2779), as its SDK's ``update_trainjob_status`` and the
  Transformers ``KubeflowTrainerCallback`` send it, so a script instrumented for Trainer reports
  here unchanged::

      {"trainerStatus": {"progressPercentage": 45, "estimatedRemainingSeconds": 120,
                         "metrics": [{"name": "loss", "value": "0.15"}, {"name": "current_step", "value": "450"}],
                         "lastUpdatedTime": "2026-11-27T10:30:45+00:00"}}

  Metric values are strings (numbers are taken too). The names Trainer's clients use for the
  values ``status.progress`` keeps apart (``current_step``, ``total_steps``, ``current_epoch``,
  the KEP's ``currentEpoch`` and ``totalEpochs``) become ``step``, ``total_steps``, ``epoch`` and
  ``total_epochs``; every other numeric metric is a named metric. ``lastUpdatedTime`` is not
  used: the controller records when the report arrived (a pod's clock is not the cluster's).
- **Ours**, the object a ``T9K_PROGRESS`` line carries: ``{"step": 120, "total_steps": 1000,
  "loss": 0.31, "metrics": {"acc": 0.9}}``.

Pure: the endpoint (``controller/push_server.py``) and the tests use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_t9k.api.progress import MAX_METRICS, RESERVED, _add_metric, _field, _number, _tidy, parse_values

Obj = dict[str, Any]

TRAINER = "trainerStatus"
MAX_BODY = 65536  # bytes of a request body, as Trainer's server allows
MAX_ITEMS = 256  # entries of trainerStatus.metrics looked at (Trainer's CRD allows 256)
MAX_VALUE = 64  # characters of a metric's value string (Trainer's CRD allows 64)
# Trainer's metric names for the values status.progress keeps apart.
ALIASES = {"current_step": "step", "currentStep": "step", "current_epoch": "epoch", "currentEpoch": "epoch",
           **RESERVED}  # fmt: skip
TRAINER_FIELDS = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")


class BadBody(ValueError):
    """The body is not one of the accepted shapes; the message says what is wrong."""


@dataclass
class Pushed:
    """One pushed body: the report (as ``parse_line`` gives one, plus ``percent`` and
    ``eta_seconds`` from Trainer's body), None when it carries nothing; what it ignored."""

    report: Obj | None
    ignored: list[str] = field(default_factory=list)
    empty: bool = False  # Trainer's ``{"trainerStatus": null}``: nothing to say, and not an error


def parse_push(body: Any) -> Pushed:
    """The report in a pushed body. Raises BadBody when the body is not a JSON object, or its
    ``trainerStatus`` not an object (or null)."""
    if not isinstance(body, dict):
        raise BadBody(
            'the body must be a JSON object: Kubeflow Trainer\'s {"trainerStatus": {...}} or {"step": ..., "loss": ...}'
        )
    if TRAINER in body:
        return _trainer(body)
    report = parse_values(body)
    return Pushed(report, _ignored_native(body, report or {}))


def _ignored_native(body: Obj, report: Obj) -> list[str]:
    metrics = report.get("metrics") or {}
    out = []
    for key, value in body.items():
        if key in RESERVED:
            if RESERVED[key] not in report:
                out.append(str(key))
        elif key == "metrics" and isinstance(value, dict):
            out += [f"metrics.{name}" for name in value if name not in metrics]
        elif key not in metrics:
            out.append(str(key))
    return out


def _trainer(body: Obj) -> Pushed:
    status = body[TRAINER]
    ignored = [str(k) for k in body if k != TRAINER]
    if status is None:
        return Pushed(None, ignored, empty=True)
    if not isinstance(status, dict):
        raise BadBody(f"{TRAINER} must be an object or null")
    report: Obj = {}
    ignored += [f"{TRAINER}.{k}" for k in status if k not in TRAINER_FIELDS]
    if "progressPercentage" in status:
        pct = _number(status["progressPercentage"])
        if pct is not None and 0 <= pct <= 100:
            report["percent"] = _tidy(round(pct, 1))
        else:
            ignored.append(f"{TRAINER}.progressPercentage")
    if "estimatedRemainingSeconds" in status:
        eta = _number(status["estimatedRemainingSeconds"])
        if eta is not None and 0 <= eta < 2**31:
            report["eta_seconds"] = int(round(eta))
        else:
            ignored.append(f"{TRAINER}.estimatedRemainingSeconds")
    items = status.get("metrics")
    if items is not None and not isinstance(items, list):
        ignored.append(f"{TRAINER}.metrics")
        items = []
    metrics: Obj = {}
    for i, item in enumerate(items or []):
        name = item.get("name") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if i >= MAX_ITEMS or not isinstance(name, str) or (isinstance(value, str) and len(value) > MAX_VALUE):
            ignored.append(f"{TRAINER}.metrics[{i}]" + (f" ({name})" if isinstance(name, str) else ""))
            continue
        if name in ALIASES:
            key = ALIASES[name]
            number = _field(key, value)
            if number is None:
                ignored.append(f"{TRAINER}.metrics[{i}] ({name})")
            else:
                report[key] = number
            continue
        _add_metric(metrics, name, value)
        if name not in metrics:
            why = "" if len(metrics) < MAX_METRICS else f", past {MAX_METRICS} names"
            ignored.append(f"{TRAINER}.metrics[{i}] ({name}{why})")
    if metrics:
        report["metrics"] = metrics
    return Pushed(report or None, ignored)
