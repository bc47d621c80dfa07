"""What loading a DAG file costs: our operator, sensor and trigger modules leave the
Kubernetes clients unloaded until a hook is made (airflow_t9k/hooks/__init__.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("kubernetes", "kubernetes_asyncio", "airflow.providers.cncf.kubernetes.hooks.kubernetes")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "module",
    ["airflow_t9k.operators.kinds", "airflow_t9k.operators.ti", "airflow_t9k.sensors.job", "airflow_t9k.triggers.job"],
)
def test_importing_what_a_dag_file_uses_leaves_the_kubernetes_clients_unloaded(module):
    assert _loaded_after(f"import {module}") == []


def test_making_a_hook_loads_them():
    """The check above could pass by never looking: the same probe sees them once a hook is made."""
    code = (
        "from airflow_t9k.operators.kinds import GenericJobOperator\n"
        "op = GenericJobOperator(task_id='t', image='busybox')\n"
        "op.hook"
    )
    assert _loaded_after(code) == sorted(HEAVY)
