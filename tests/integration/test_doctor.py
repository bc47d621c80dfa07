"""``airflow-t9k doctor --conn-id``: what a connection's identity can do, asked of the real API
server (issue 44, item 7). Airflow's Test button asks only for /version; a task's missing right
shows up hours later as a 403. Real ServiceAccount tokens: one with every right the tasks and
the triggerer use, one that may only read jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.rbac import airflow_rules, token_kubeconfig


def _doctor(kubeconfig, namespace: str) -> subprocess.CompletedProcess[str]:
    conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig), "namespace": namespace}}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}, "AIRFLOW_CONN_T9K_DOCTOR": json.dumps(conn)}
    return subprocess.run([sys.executable, "-m", "airflow_t9k.cli", "doctor", "--conn-id", "t9k_doctor", "--kind", "GenericJob"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_doctor_names_every_missing_right_and_passes_a_whole_role(api_client, cluster, namespace, crds, tmp_path):
    whole = token_kubeconfig(api_client, cluster.kubeconfig, namespace, "whole", airflow_rules(), tmp_path / "whole")
    out = _doctor(whole, namespace)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "genericjobs.batch.tensorstack.dev" in out.stdout
    assert "checks passed" in out.stdout
    assert "NO " not in out.stdout

    reader = token_kubeconfig(api_client, cluster.kubeconfig, namespace, "reader",
                              airflow_rules(job_verbs=("get", "list")), tmp_path / "reader")  # fmt: skip
    out = _doctor(reader, namespace)
    assert out.returncode == 1, out.stdout + out.stderr
    missing = sorted(line.split()[1] for line in out.stdout.splitlines() if line.startswith("NO "))
    assert missing == sorted(
        f"{v} genericjobs.batch.tensorstack.dev".split()[0] for v in ("create", "watch", "patch", "delete")
    ), out.stdout
    assert "MISSING in " + namespace in out.stdout
