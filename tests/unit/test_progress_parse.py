"""api/progress.py: the T9K_PROGRESS line format, what reads it back (XCom metrics, the task log)."""

from __future__ import annotations

import pytest

from airflow_t9k.api.progress import MAX_LINE, MAX_METRICS, describe, merge, metrics_of, parse_line

CASES = [
    # (line, report)
    ('T9K_PROGRESS {"step": 120, "total_steps": 1000, "epoch": 2, "loss": 0.31, "metrics": {"acc": 0.9}}',
     {"step": 120, "total_steps": 1000, "epoch": 2, "metrics": {"loss": 0.31, "acc": 0.9}}),
    ("T9K_PROGRESS step=120 total_steps=1000 epoch=2 loss=0.31 acc=0.9",
     {"step": 120, "total_steps": 1000, "epoch": 2, "metrics": {"loss": 0.31, "acc": 0.9}}),
    ("T9K_PROGRESS step=5, loss=1.5", {"step": 5, "metrics": {"loss": 1.5}}),  # commas between pairs
    ('T9K_PROGRESS {"totalSteps": 10, "totalEpochs": 3, "step": 1}', {"total_steps": 10, "total_epochs": 3, "step": 1}),
    # After a prefix: a logger's, torchrun's [rank0]:, pdsh's host:
    ('2026-11-26 10:00:00 INFO train: T9K_PROGRESS {"step": 7}', {"step": 7}),
    ('[rank0]: T9K_PROGRESS {"step": 7}', {"step": 7}),
    ('job-worker-0: T9K_PROGRESS {"step": 7}', {"step": 7}),
    ('T9K_PROGRESS {"step": 7} trailing text after the object', {"step": 7}),
    ('T9K_PROGRESS {"step": 7}\r', {"step": 7}),
    # Numbers: floats as whole steps, numeric strings, rounding, fractional epochs
    ('T9K_PROGRESS {"step": 12.0, "epoch": 2.5, "loss": "0.25"}', {"step": 12, "epoch": 2.5, "metrics": {"loss": 0.25}}),
    ('T9K_PROGRESS {"loss": 0.123456789123}', {"metrics": {"loss": 0.123457}}),
    ('T9K_PROGRESS {"lr": 1e-5, "tokens": 12000000000}', {"metrics": {"lr": 1e-05, "tokens": 12000000000}}),
    # Invalid values are dropped, the rest kept
    ('T9K_PROGRESS {"step": -1, "epoch": -2, "loss": 0.5}', {"metrics": {"loss": 0.5}}),
    ('T9K_PROGRESS {"step": 1.5, "total_steps": 0, "total_epochs": 0, "loss": 0.5}', {"metrics": {"loss": 0.5}}),
    ('T9K_PROGRESS {"step": 3, "loss": NaN, "acc": Infinity, "ok": true, "name": "resnet", "x": null, "l": [1]}', {"step": 3}),
    ('T9K_PROGRESS {"step": 3, "bad name": 1, "": 2, "a-very-long-name-%s": 3}' % ("x" * 80), {"step": 3}),
    ('T9K_PROGRESS {"step": 3, "metrics": {"val/acc": 0.8, "eval:loss": 0.2, "metrics": 1, "step": 9}}',
     {"step": 3, "metrics": {"val/acc": 0.8, "eval:loss": 0.2}}),
    ('T9K_PROGRESS {"step": 3, "metrics": [1, 2]}', {"step": 3}),
    # A name must match whole: a trailing newline (or one inside) reached status and the task log
    ('T9K_PROGRESS {"step": 3, "loss\\n": 0.5, "acc\\nFAKE: done": 1, "ok": 0.1}', {"step": 3, "metrics": {"ok": 0.1}}),
    ('T9K_PROGRESS {"step": 3, "metrics": {"val/acc\\n": 0.8}}', {"step": 3}),
    ('T9K_PROGRESS {"step": 1e400}', None),  # not finite
    ('T9K_PROGRESS {"step": 123456789012345678901234567890}', None),  # too large to be a step
    # Garbage: no report at all
    ("epoch 1 loss 0.9", None),
    ("", None),
    ("T9K_PROGRESS", None),
    ("T9K_PROGRESS ", None),
    ("T9K_PROGRESS {", None),
    ('T9K_PROGRESS {"step": ', None),
    ("T9K_PROGRESS [1, 2, 3]", None),
    ('T9K_PROGRESS "step"', None),
    ("T9K_PROGRESS step", None),
    ("T9K_PROGRESS step=1 oops", None),  # a word that is no pair: the line is not a report
    ("T9K_PROGRESS =1", None),
    ('T9K_PROGRESS {"name": "resnet"}', None),  # nothing numeric
    ('T9K_PROGRESSING {"step": 1}', None),  # another word
    ('MY_T9K_PROGRESS {"step": 1}', None),
    ('T9K_PROGRESS{"step": 1}', None),  # the word must stand alone
    ('T9K_PROGRESS ' + "[" * 5000 + "]" * 5000, None),
    ('T9K_PROGRESS ' + "{" * 3000, None),
    ('T9K_PROGRESS {"step": 1, "pad": "%s"}' % ("x" * MAX_LINE), None),  # longer than a report may be
    ("\x00\xff T9K_PROGRESS \ufffd", None),
]  # fmt: skip


@pytest.mark.parametrize(("line", "report"), CASES, ids=[f"{i}:{c[0][:40]}" for i, c in enumerate(CASES)])
def test_parse_line(line, report):
    assert parse_line(line) == report


def test_parse_line_takes_bytes_with_invalid_utf8():
    assert parse_line(b'\xff\xfe T9K_PROGRESS {"step": 4}') == {"step": 4}


def test_at_most_max_metrics_names_per_line():
    line = "T9K_PROGRESS " + " ".join(f"m{i}={i}" for i in range(MAX_METRICS + 5))
    report = parse_line(line)
    assert report is not None
    assert list(report["metrics"]) == [f"m{i}" for i in range(MAX_METRICS)]


MERGES = [
    # (state, report, merged)
    (None, {"step": 1, "metrics": {"loss": 1.0}}, {"step": 1, "metrics": {"loss": 1.0}}),
    ({"step": 1, "total_steps": 10, "metrics": {"loss": 1.0}}, {"step": 2},
     {"step": 2, "total_steps": 10, "metrics": {"loss": 1.0}}),
    ({"step": 2, "metrics": {"loss": 1.0}}, {"metrics": {"val_acc": 0.7}}, {"step": 2, "metrics": {"loss": 1.0, "val_acc": 0.7}}),
    ({"metrics": {"loss": 1.0}}, {"metrics": {"loss": 0.5}}, {"metrics": {"loss": 0.5}}),
    ({"step": 9}, {"step": 1}, {"step": 1}),  # a restart from scratch: the count goes back
    ({"metrics": {f"m{i}": i for i in range(MAX_METRICS)}}, {"metrics": {"new": 1, "m0": 7}},
     {"metrics": {**{f"m{i}": i for i in range(MAX_METRICS)}, "m0": 7}}),  # a 17th name is dropped, known ones update
]  # fmt: skip


@pytest.mark.parametrize(("state", "report", "merged"), MERGES)
def test_merge(state, report, merged):
    before = repr(state)
    assert merge(state, report) == merged
    assert repr(state) == before  # the state given is not changed


PROGRESS = {"step": 120, "totalSteps": 1000, "epoch": 2, "percent": 12.0, "metrics": {"acc": 0.9, "loss": 0.31},
            "eta": "2m30s", "summary": "12% 120/1000", "history": {"every": 10, "points": []}}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "metrics"),
    [
        ({"progress": PROGRESS}, {"step": 120, "total_steps": 1000, "epoch": 2, "acc": 0.9, "loss": 0.31}),
        ({"progress": {"epoch": 1.5, "totalEpochs": 3}}, {"epoch": 1.5, "total_epochs": 3}),
        ({"progress": {"metrics": {"loss": 0.1, "text": "x", "step": 5}}}, {"loss": 0.1}),  # a metric never hides the step
        ({"progress": "garbage"}, {}),
        ({}, {}),
        (None, {}),
    ],
)
def test_metrics_of_status_for_xcom(status, metrics):
    assert metrics_of(status) == metrics


@pytest.mark.parametrize(
    ("progress", "text"),
    [
        (PROGRESS, "step 120/1000 (12%), epoch 2, acc 0.9, loss 0.31, ETA 2m30s"),
        ({"epoch": 2, "totalEpochs": 5, "percent": 40.0}, "epoch 2/5 (40%)"),
        ({"step": 7}, "step 7"),
        ({"metrics": {"loss": 0.123456}}, "loss 0.1235"),
        ({}, ""),
        (None, ""),
    ],
)
def test_describe_for_the_task_log(progress, text):
    assert describe(progress) == text
