"""The shared status interpreter and the aUbGcP machine-type parser."""

from __future__ import annotations

import pytest

from airflow_t9k.api.machine import InvalidMachineType, parse_machine_type
from airflow_t9k.api.outcome import interpret


def job(status):
    return {"kind": "GenericJob", "metadata": {"name": "j"}, "status": status}


FAILED = {"phase": "Failed", "conditions": [{"type": "Failed", "status": "True", "reason": "FailureRule", "message": "rule x"}],
          "tasks": [{"type": "worker",
                     "status": [{"name": "j-worker-0", "phase": "Failed"}, {"name": "j-worker-1", "phase": "Running"}]}],
          "aggregate": {"failed": 1, "running": 1, "pending": 0}}  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "phase", "terminal", "succeeded", "message"),
    [
        (None, None, False, False, "the job does not exist"),
        (job({}), None, False, False, ""),
        (job({"phase": "Running"}), "Running", False, False, ""),
        (job({"phase": "Succeeded", "conditions": [{"type": "Completed", "status": "True", "message": "done"}]}), "Succeeded",
         True, True, "done"),
        (job(FAILED), "Failed", True, False, "rule x"),
        (job({"phase": "Paused", "conditions": [{"type": "Paused", "status": "True", "message": "paused"}]}), "Paused", False,
         False, "paused"),
        (job({"conditions": [{"type": "Succeeded", "status": "True", "message": "ok"}]}), "Succeeded", True, True, "ok"),
        (job({"conditions": [{"type": "Failed", "status": "True", "message": "bad"}]}), "Failed", True, False, "bad"),
        (job({"conditions": [{"type": "Running", "status": "True"}]}), "Running", False, False, ""),
        (job({"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "False"},
                             {"type": "Restarting", "status": "True"}]}), "Restarting", False, False, ""),
        (job({"conditions": [{"type": "Created", "status": "True"}]}), "Created", False, False, ""),
    ],
    ids=["missing", "no-status", "running", "succeeded", "failed", "paused", "ascend-succeeded", "ascend-failed",
         "ascend-running",
         "ascend-restarting", "ascend-created"],
)  # fmt: skip
def test_interpret(obj, phase, terminal, succeeded, message):
    state = interpret(obj)
    assert (state.phase, state.terminal, state.succeeded, state.message) == (phase, terminal, succeeded, message)


def test_failed_replicas_and_summary():
    state = interpret(job(FAILED))
    assert state.failed_replicas == ("j-worker-0",)
    assert state.summary() == "phase Failed (failed 1, running 1): rule x"
    assert state.as_dict()["reason"] == "FailureRule"


@pytest.mark.parametrize(
    ("text", "resources"),
    [
        ("2U8G1P", {"cpu": "2", "memory": "8G", "nvidia.com/gpu": "1"}),
        ("1U2G1P", {"cpu": "1", "memory": "2G", "nvidia.com/gpu": "1"}),
        ("0U0G1P", {"nvidia.com/gpu": "1"}),
        ("4U16G0P", {"cpu": "4", "memory": "16G"}),
        ("0.5U1.5G0P", {"cpu": "0.5", "memory": "1.5G"}),
        (" 8U32G4P ", {"cpu": "8", "memory": "32G", "nvidia.com/gpu": "4"}),
    ],
)
def test_machine_types(text, resources):
    out = parse_machine_type(text).resources()
    assert out == {"requests": resources, "limits": resources}


@pytest.mark.parametrize("text", ["", "2u8g1p", "2U8G", "U8G1P", "2U8G1.5P", "2C8G1P", "-1U2G0P", "2U8G1P1"])
def test_malformed_machine_types(text):
    with pytest.raises(InvalidMachineType, match="aUbGcP"):
        parse_machine_type(text)


def test_all_zero_machine_type_is_the_empty_type():
    # Seed 004: 0 means "the default", and an empty type is defaults with no GPU (fidelity issue, item 12).
    assert parse_machine_type("0U0G0P").resources() == {}
