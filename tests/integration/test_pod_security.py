"""Pod Security ``restricted`` with the per-kind operators' security contexts (issue 28, point 8),
against the real API server and controller: the namespace enforces ``restricted``; a job given
``security_context`` and ``container_security_context`` as a KubernetesPodOperator user writes
them runs, and one without them is refused by the API server's Pod Security admission."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException
from kubernetes.client import models as k

from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator
from tests.integration.test_operator_trigger import conn  # noqa: F401
from tests.support.task import context

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}


@pytest.fixture
def restricted(core, namespace):
    core.patch_namespace(namespace, {"metadata": {"labels": RESTRICTED}})
    return namespace


def _op(**kw):
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return PyTorchTrainingJobOperator(task_id="train", image="busybox", replicas=2, deferrable=False, timeout=120,
                                          pod_annotations={"sim.t9k.test/duration": "2s"}, **kw)  # fmt: skip


def test_a_job_with_restricted_security_contexts_runs_in_a_restricted_namespace(conn, restricted, jobs, controller):
    out = _op(
        security_context=k.V1PodSecurityContext(run_as_non_root=True, run_as_user=1000,
                                                seccomp_profile=k.V1SeccompProfile(type="RuntimeDefault")),
        container_security_context={"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    ).execute(context())  # fmt: skip
    assert out["phase"] == "Succeeded"


def test_without_them_the_api_server_refuses_the_pods(conn, restricted, jobs, controller):
    with pytest.raises(AirflowException) as exc:
        _op(startup_timeout=20).execute(context())
    assert "violates PodSecurity" in str(exc.value) or "restricted" in str(exc.value), str(exc.value)
