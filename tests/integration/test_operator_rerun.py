"""Clear and re-run, retries after a pause, writes that must reach only our job, explicit names
and pod-level options: the operator against the real API server and controller.

The Airflow side is the same stand-in as test_operator_trigger.py (a task instance and its
state store); whole DAGs run under real Airflow in test_airflow_dags.py.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout, TaskDeferred

from airflow_t9k.operators.job import T9kJobOperator
from airflow_t9k.operators.kinds import GenericJobOperator
from tests.integration.test_operator_trigger import _gone, conn, first_event, make_op  # noqa: F401 - fixtures
from tests.support.cluster import wait_until
from tests.support.task import Store, context

CONSUMED = "airflow-t9k.io/consumed-by-try"
DELIVERED = "airflow-t9k.io/delivered-by-try"
DONE = {"sim.t9k.test/duration": "1s"}


def _uids(jobs):
    items = jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns, "genericjobs")["items"]
    return sorted(i["metadata"]["uid"] for i in items)


def _stranger(jobs, name):
    """Another object that took the name: no airflow-t9k identity, runs until deleted."""
    container = {"name": "main", "image": "busybox"}
    return jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
                        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1,
                                                   "template": {"spec": {"containers": [container]}}}]}})  # fmt: skip


def _paused(job):
    return bool(((job["spec"].get("runMode") or {}).get("pause") or {}).get("enabled"))


# -- bug 1: a Clear after success runs the job again ------------------------------------------
@pytest.mark.parametrize("store_kept", [True, False], ids=["state-store-kept", "state-store-cleared"])
def test_clearing_a_succeeded_task_runs_the_job_again(conn, jobs, controller, store_kept):
    store = Store()
    first = make_op(sim=DONE, deferrable=False).execute(context(store))
    assert first["phase"] == "Succeeded"
    assert jobs.get("GenericJob", first["name"])["metadata"]["annotations"][DELIVERED] == "1"
    again = make_op(sim=DONE, deferrable=False).execute(context(store if store_kept else Store(), try_number=2))
    assert again["phase"] == "Succeeded"
    assert again["name"] == f"{first['name']}-t2"
    assert again["uid"] != first["uid"]
    assert _uids(jobs) == sorted([first["uid"], again["uid"]])  # the first run stays, as its try's record
    assert jobs.get("GenericJob", again["name"])["metadata"]["annotations"][DELIVERED] == "2"
    owners = {ref.uid for pod in jobs.pods(again["name"]).values() for ref in pod.metadata.owner_references or []}
    assert owners == {again["uid"]}
    third = make_op(sim=DONE, deferrable=False).execute(context(store if store_kept else Store(), try_number=3))
    assert third["name"] == f"{first['name']}-t3"
    assert len(_uids(jobs)) == 3


# -- point 5: a retry does not wait for the failed attempt's pods, and keeps them -------------
def test_a_retry_does_not_wait_for_the_failed_attempts_terminating_pods(conn, jobs, controller):
    import time

    store = Store()
    failing = {**DONE, "sim.t9k.test/fail-pods": "-worker-0$"}
    with pytest.raises(AirflowException, match="failed replicas"):
        make_op(sim=failing, deferrable=False).execute(context(store))
    name, failed_uid = store["t9k_job"]["name"], store["t9k_job"]["uid"]
    stuck = f"{name}-worker-0"
    # As on a NotReady node: the pod is being deleted and does not go (a finalizer holds it).
    jobs.core.patch_namespaced_pod(stuck, jobs.ns, {"metadata": {"finalizers": ["airflow-t9k.test/hold"]}})
    try:
        jobs.core.delete_namespaced_pod(stuck, jobs.ns)
        started = time.monotonic()
        with pytest.raises(TaskDeferred) as exc:
            make_op(sim=DONE, deferrable=True).execute(context(store, try_number=2))
        assert time.monotonic() - started < 20  # it used to wait up to 300 s for the old pods
        assert exc.value.trigger.name == f"{name}-t2"
        old = jobs.get("GenericJob", name)  # the failed attempt's job stays, with what it reported
        assert (old["status"]["phase"], old["metadata"]["uid"]) == ("Failed", failed_uid)
    finally:
        jobs.core.patch_namespaced_pod(stuck, jobs.ns, {"metadata": {"finalizers": None}})


def test_a_finished_job_no_try_consumed_is_reattached_then_replaced(conn, jobs, controller):
    store = Store()
    with pytest.raises(TaskDeferred) as exc:  # the worker "dies" while deferred; the job ends meanwhile
        make_op(sim=DONE, deferrable=True).execute(context(store))
    uid = exc.value.trigger.uid
    jobs.wait_phase("GenericJob", exc.value.trigger.name, "Succeeded")
    retry = make_op(sim=DONE, deferrable=True).execute(context(store, try_number=2))
    assert (retry["phase"], retry["uid"]) == ("Succeeded", uid)  # its result, not a second run
    with pytest.raises(TaskDeferred) as cleared:
        make_op(sim=DONE, deferrable=True).execute(context(store, try_number=3))
    assert cleared.value.trigger.uid != uid


# -- bug 4: a retry resumes the job its predecessor's timeout paused, and only that -----------
def test_retry_resumes_a_job_paused_by_a_timeout_but_not_one_paused_by_hand(conn, jobs, controller):
    store = Store()
    with pytest.raises(AirflowTaskTimeout):
        make_op(deferrable=False, timeout=3, on_kill_action="pause").execute(context(store))
    name, uid = store["t9k_job"]["name"], store["t9k_job"]["uid"]
    paused = jobs.wait_phase("GenericJob", name, "Paused")
    assert paused["metadata"]["annotations"]["airflow-t9k.io/paused-by"] == "timeout of try 1"
    with pytest.raises(TaskDeferred) as exc:
        make_op(deferrable=True, on_kill_action="pause").execute(context(store, try_number=2))
    assert exc.value.trigger.uid == uid
    resumed = jobs.wait_phase("GenericJob", name, "Resuming", "Running")
    assert not _paused(resumed)
    assert "airflow-t9k.io/paused-by" not in resumed["metadata"].get("annotations", {})

    by_hand = Store()
    with pytest.raises(TaskDeferred) as exc:
        make_op(deferrable=True, on_kill_action="pause").execute(context(by_hand, run_id="manual__hand"))
    jobs.patch("GenericJob", exc.value.trigger.name, {"spec": {"runMode": {"pause": {"enabled": True}}}})
    with pytest.raises(TaskDeferred):
        make_op(deferrable=True, on_kill_action="pause").execute(context(by_hand, run_id="manual__hand", try_number=2))
    assert _paused(jobs.get("GenericJob", exc.value.trigger.name))


# -- bug 7: deletes and pauses reach our job, never the object that took its name -------------
@pytest.mark.asyncio
async def test_delete_on_finish_leaves_a_replacement_of_the_same_name_alone(conn, jobs, controller):
    store = Store()
    with pytest.raises(TaskDeferred) as exc:
        make_op(deferrable=True, delete_on_finish="always").execute(context(store))
    trigger = exc.value.trigger
    task = asyncio.create_task(first_event(trigger))
    await asyncio.sleep(0.5)
    jobs.delete("GenericJob", trigger.name)
    wait_until(lambda: _gone(jobs, trigger.name), what="our job deleted")
    stranger = _stranger(jobs, trigger.name)
    event = (await task).payload
    with pytest.raises(AirflowException):
        make_op(deferrable=True, delete_on_finish="always").execute_complete(context(store), event)
    assert jobs.get("GenericJob", trigger.name)["metadata"]["uid"] == stranger["metadata"]["uid"]


@pytest.mark.parametrize("action", ["delete", "pause"])
def test_a_kill_leaves_a_replacement_of_the_same_name_alone(conn, jobs, controller, action):
    op = make_op(deferrable=False, wait_for_completion=False, on_kill_action=action)
    ident = op.execute(context())
    jobs.delete("GenericJob", ident["name"])
    wait_until(lambda: _gone(jobs, ident["name"]), what="our job deleted")
    stranger = _stranger(jobs, ident["name"])
    op.on_kill()
    now = jobs.get("GenericJob", ident["name"])
    assert now["metadata"]["uid"] == stranger["metadata"]["uid"]
    assert not _paused(now)


# -- explicit names: a scheduled DAG runs every time ------------------------------------------
def _named_op(**kw):
    job = {"kind": "GenericJob", "metadata": {"name": "nightly"},
           "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1,
                                      "template": {"metadata": {"annotations": DONE},
                                                   "spec": {"containers": [{"name": "m", "image": "busybox"}]}}}]}}  # fmt: skip
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return T9kJobOperator(task_id="train", job=job, deferrable=False, **kw)


def test_a_job_with_an_explicit_name_runs_on_every_dag_run(conn, jobs, controller):
    runs = [_named_op().execute(context(run_id=f"scheduled__2026-11-2{i}")) for i in (1, 2)]
    assert [r["phase"] for r in runs] == ["Succeeded", "Succeeded"]
    assert runs[0]["name"] != runs[1]["name"]
    assert all(r["name"].startswith("nightly-") for r in runs)
    assert len(_uids(jobs)) == 2


def test_name_suffix_false_keeps_the_name_and_says_how_to_fix_the_conflict(conn, jobs, controller):
    assert _named_op(name_suffix=False).execute(context(run_id="scheduled__1"))["name"] == "nightly"
    with pytest.raises(AirflowException, match="not a job this task recorded submitting.*name_suffix=True"):
        _named_op(name_suffix=False).execute(context(run_id="scheduled__2"))


# -- pod-level options reach the pods ----------------------------------------------------------
def test_volume_toleration_and_shared_memory_reach_every_replica_pod(conn, jobs, controller):
    from kubernetes.client import models as k

    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = GenericJobOperator(
            task_id="train", image="busybox", replicas=2, deferrable=False, wait_for_completion=False,
            volumes=[k.V1Volume(name="data", config_map=k.V1ConfigMapVolumeSource(name="settings", optional=True))],
            volume_mounts=[{"name": "data", "mountPath": "/data"}],
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            shm_size="1Gi", labels={"team": "ml"},
        )  # fmt: skip
    ident = op.execute(context())
    running = jobs.wait_phase("GenericJob", ident["name"], "Running")
    assert running["metadata"]["annotations"][CONSUMED] == "1"  # wait_for_completion=False: the submitting try is done with it
    pods = jobs.pods(ident["name"])
    assert len(pods) == 2
    for pod in pods.values():
        volumes = {v.name: v for v in pod.spec.volumes}
        assert volumes["data"].config_map.name == "settings"
        shm = volumes["airflow-t9k-shm"].empty_dir
        assert (shm.medium, shm.size_limit) == ("Memory", "1Gi")
        mounts = {m.mount_path: m.name for m in pod.spec.containers[0].volume_mounts}
        assert mounts["/data"] == "data"
        assert mounts["/dev/shm"] == "airflow-t9k-shm"
        assert any(t.key == "nvidia.com/gpu" and t.effect == "NoSchedule" for t in pod.spec.tolerations)
        assert pod.metadata.labels["team"] == "ml"


def test_kubernetes_pod_operator_model_types_reach_the_pods(conn, jobs, controller):
    from kubernetes.client import models as k

    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = GenericJobOperator(
            task_id="train", image="busybox", replicas=1, deferrable=False, wait_for_completion=False,
            container_resources=k.V1ResourceRequirements(limits={"cpu": "1", "nvidia.com/gpu": "1"}, requests={"cpu": 0.5}),
            env=[k.V1EnvVar(name="POD",
                            value_from=k.V1EnvVarSource(field_ref=k.V1ObjectFieldSelector(field_path="metadata.name")))],
            affinity=k.V1Affinity(node_affinity=k.V1NodeAffinity(preferred_during_scheduling_ignored_during_execution=[
                k.V1PreferredSchedulingTerm(weight=1, preference=k.V1NodeSelectorTerm(
                    match_expressions=[k.V1NodeSelectorRequirement(key="type", operator="In", values=["kwok"])]))])),
        )  # fmt: skip
    ident = op.execute(context())
    jobs.wait_phase("GenericJob", ident["name"], "Running")
    [pod] = jobs.pods(ident["name"]).values()
    c = pod.spec.containers[0]
    # (the API server defaults an extended resource's request to its limit)
    assert (c.resources.limits, c.resources.requests) == (
        {"cpu": "1", "nvidia.com/gpu": "1"},
        {"cpu": "500m", "nvidia.com/gpu": "1"},
    )
    assert c.env[0].value_from.field_ref.field_path == "metadata.name"
    assert pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution[0].weight == 1


@pytest.mark.asyncio
async def test_retry_resumes_a_job_paused_by_killing_the_deferred_task(conn, jobs, controller):
    store = Store()
    with pytest.raises(TaskDeferred) as exc:
        make_op(deferrable=True, on_kill_action="pause").execute(context(store))
    trigger = exc.value.trigger
    task = asyncio.create_task(first_event(trigger))
    await asyncio.sleep(0.5)
    await trigger.on_kill()  # what the triggerer does when a user marks the deferred task failed
    task.cancel()
    paused = jobs.wait_phase("GenericJob", trigger.name, "Paused")
    assert paused["metadata"]["annotations"]["airflow-t9k.io/paused-by"] == "kill"
    with pytest.raises(TaskDeferred):
        make_op(deferrable=True, on_kill_action="pause").execute(context(store, try_number=2))
    assert not _paused(jobs.wait_phase("GenericJob", trigger.name, "Resuming", "Running"))
