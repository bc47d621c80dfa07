"""api/progress_push.py: the bodies replicas push (Kubeflow Trainer's and ours), as a table."""

from __future__ import annotations

import pytest

from airflow_t9k.api.progress import MAX_METRICS
from airflow_t9k.api.progress_push import BadBody, parse_push

T = "trainerStatus"

CASES = [
    # (body, report, ignored)
    # Kubeflow SDK update_trainjob_status(progress_percent=45, estimated_remaining_seconds=120, metrics={...}):
    # values as str(v), lastUpdatedTime as datetime.isoformat().
    ({T: {"lastUpdatedTime": "2026-11-27T10:30:45.123456+00:00", "progressPercentage": 45, "estimatedRemainingSeconds": 120,
          "metrics": [{"name": "loss", "value": "0.15"}, {"name": "accuracy", "value": "0.92"}]}},
     {"percent": 45, "eta_seconds": 120, "metrics": {"loss": 0.15, "accuracy": 0.92}}, []),
    # The Transformers callback at a step: HF's logs, then current_step / total_steps / current_epoch.
    ({T: {"lastUpdatedTime": "2026-11-27T10:30:45+00:00", "progressPercentage": 37, "estimatedRemainingSeconds": 316,
          "metrics": [{"name": "loss", "value": "0.4123"}, {"name": "learning_rate", "value": "4.5e-05"},
                      {"name": "grad_norm", "value": "1.25"}, {"name": "epoch", "value": "1.11"},
                      {"name": "current_step", "value": "370"}, {"name": "total_steps", "value": "1000"},
                      {"name": "current_epoch", "value": "1.11"}]}},
     {"percent": 37, "eta_seconds": 316, "step": 370, "total_steps": 1000, "epoch": 1.11,
      "metrics": {"loss": 0.4123, "learning_rate": 4.5e-05, "grad_norm": 1.25}}, []),
    # Its first report (on_train_begin): 0 % and the total only.
    ({T: {"lastUpdatedTime": "x", "progressPercentage": 0, "metrics": [{"name": "total_steps", "value": "1000"}]}},
     {"percent": 0, "total_steps": 1000}, []),
    # The KEP's example names, camelCase.
    ({T: {"progressPercentage": 45, "metrics": [{"name": "currentEpoch", "value": "2"}, {"name": "totalEpochs", "value": "5"},
                                                {"name": "eval_loss", "value": "0.2451"}]}},
     {"percent": 45, "epoch": 2, "total_epochs": 5, "metrics": {"eval_loss": 0.2451}}, []),
    # Our helper's body: Trainer's, with our reserved names as metrics.
    ({T: {"progressPercentage": 12, "metrics": [{"name": "step", "value": "120"}, {"name": "total_steps", "value": "1000"},
                                                {"name": "loss", "value": "0.31"}]}},
     {"percent": 12, "step": 120, "total_steps": 1000, "metrics": {"loss": 0.31}}, []),
    ({T: {"metrics": [{"name": "loss", "value": 0.5}]}}, {"metrics": {"loss": 0.5}}, []),  # numbers as numbers
    # A name must match whole: a trailing newline reached status and the task log.
    ({T: {"metrics": [{"name": "loss\n", "value": "0.2"}, {"name": "acc", "value": "0.9"}]}},
     {"metrics": {"acc": 0.9}}, ["trainerStatus.metrics[0] (loss\n)"]),
    ({"step": 1, "loss\n": 0.5}, {"step": 1}, ["loss\n"]),
    # Invalid parts are left out and named; the rest is kept.
    ({T: {"progressPercentage": 140, "estimatedRemainingSeconds": -3, "metrics": [{"name": "loss", "value": "1"}]}},
     {"metrics": {"loss": 1}}, [f"{T}.progressPercentage", f"{T}.estimatedRemainingSeconds"]),
    ({T: {"progressPercentage": "half", "metrics": [{"name": "loss", "value": "NaN"}, {"name": "acc", "value": "high"},
                                                    {"name": "ok", "value": "0.5"}]}},
     {"metrics": {"ok": 0.5}}, [f"{T}.progressPercentage", f"{T}.metrics[0] (loss)", f"{T}.metrics[1] (acc)"]),
    ({T: {"metrics": [{"name": "current_step", "value": "1.5"}, "loss", {"value": "1"}, {"name": "x", "value": "1" * 65},
                      {"name": "bad name", "value": "1"}, {"name": "y", "value": "2"}]}},
     {"metrics": {"y": 2}},
     [f"{T}.metrics[0] (current_step)", f"{T}.metrics[1]", f"{T}.metrics[2]", f"{T}.metrics[3] (x)",
      f"{T}.metrics[4] (bad name)"]),
    ({T: {"metrics": {"loss": 1}, "progressPercentage": 5}}, {"percent": 5}, [f"{T}.metrics"]),  # a map, not a list
    ({T: {"progressPercentage": 5, "phase": "x"}, "other": 1}, {"percent": 5}, ["other", f"{T}.phase"]),
    ({T: {"progressPercentage": 33.33}}, {"percent": 33.3}, []),
    # Nothing valid: no report (the endpoint answers 422 naming what it ignored).
    ({T: {}}, None, []),
    ({T: {"metrics": [{"name": "note", "value": "warming up"}]}}, None, [f"{T}.metrics[0] (note)"]),
    # Ours: the object a T9K_PROGRESS line carries.
    ({"step": 120, "total_steps": 1000, "epoch": 2, "loss": 0.31, "metrics": {"acc": 0.9}},
     {"step": 120, "total_steps": 1000, "epoch": 2, "metrics": {"loss": 0.31, "acc": 0.9}}, []),
    ({"step": -1, "loss": "NaN", "name": "resnet", "metrics": {"acc": 0.5, "bad": "x"}},
     {"metrics": {"acc": 0.5}}, ["step", "loss", "name", "metrics.bad"]),
    ({}, None, []),
]  # fmt: skip


@pytest.mark.parametrize(("body", "report", "ignored"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_pushed_bodies(body, report, ignored):
    pushed = parse_push(body)
    assert (pushed.report, pushed.ignored, pushed.empty) == (report, ignored, False)


def test_trainer_null_status_is_nothing_to_say_and_no_error():
    pushed = parse_push({T: None})
    assert (pushed.report, pushed.empty) == (None, True)


@pytest.mark.parametrize("body", [[1, 2], "text", 3, None, {T: [1]}, {T: "45%"}])
def test_bodies_of_another_shape_are_refused_with_a_reason(body):
    with pytest.raises(BadBody, match="must be"):
        parse_push(body)


def test_at_most_max_metrics_names_and_the_rest_is_named():
    items = [{"name": f"m{i}", "value": str(i)} for i in range(MAX_METRICS + 3)]
    pushed = parse_push({T: {"metrics": items}})
    assert pushed.report is not None
    assert list(pushed.report["metrics"]) == [f"m{i}" for i in range(MAX_METRICS)]
    assert pushed.ignored == [f"{T}.metrics[{i}] (m{i}, past {MAX_METRICS} names)" for i in range(MAX_METRICS, MAX_METRICS + 3)]


def test_only_the_first_256_entries_are_looked_at():
    items = [{"name": "loss", "value": "1"}] * 300
    pushed = parse_push({T: {"metrics": items}})
    assert pushed.report == {"metrics": {"loss": 1}}
    assert len(pushed.ignored) == 44
