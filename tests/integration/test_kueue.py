"""Queues, priorities and gang admission through a real Kueue (scripts/local-cluster.sh kueue).

Each test gets its own ClusterQueue (4 GPUs, 2 NPUs) for its namespace and a LocalQueue
``gpu`` in it, so the tests never compete with each other's (or anyone's) quota. Kueue is
started through the project's script when it is not running, as the cluster fixture does.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import SCRIPT, wait_until

SIM = "sim.t9k.test"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
GK = "GenericJob"


def kueue_running() -> bool:
    return subprocess.run([str(SCRIPT), "kueue", "status"], check=False, capture_output=True).returncode == 0


@pytest.fixture(scope="session")
def kueue(cluster) -> None:
    if not kueue_running():
        subprocess.run([str(SCRIPT), "kueue", "up"], check=True)


@pytest.fixture
def custom(api_client) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def queue(kueue, custom, namespace) -> Iterator[str]:
    """A ClusterQueue of 4 GPUs (and 2 NPUs) for this namespace only, and LocalQueue ``gpu``."""
    cq = f"cq-{namespace}"
    resources = [("cpu", "64"), ("memory", "256Gi"), ("nvidia.com/gpu", "4"), ("huawei.com/Ascend910", "2")]
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                 "preemption": {"withinClusterQueue": "LowerPriority"},
                 "resourceGroups": [{"coveredResources": [r for r, _ in resources],
                                     "flavors": [{"name": "default", "resources": [{"name": r, "nominalQuota": q}
                                                                                   for r, q in resources]}]}]}})  # fmt: skip
    custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "gpu"},
        "spec": {"clusterQueue": cq}})  # fmt: skip
    try:
        yield "gpu"
    finally:
        if not kueue_running():  # a test that stopped Kueue and failed before starting it again
            subprocess.run([str(SCRIPT), "kueue", "up"], check=False)
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", cq, propagation_policy="Background")


def gjob(name: str, replicas: int = 3, duration: str | None = "4s", priority: int | None = None, queue: str = "gpu") -> dict:
    sched: dict[str, Any] = {"queue": queue}
    if priority is not None:
        sched["priority"] = priority
    annotations = {f"{SIM}/duration": duration} if duration else {}
    gpu = {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GK, "metadata": {"name": name},
        "spec": {"scheduler": {"t9kScheduler": sched}, "replicaSpecs": [{
            "type": "worker", "replicas": replicas,
            "template": {"metadata": {"annotations": annotations},
                         "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["train"],
                                                  "resources": {"requests": gpu, "limits": gpu}}]}}}]},
    }  # fmt: skip


def workload(custom, ns: str, name: str) -> dict | None:
    try:
        return custom.get_namespaced_custom_object(*KUEUE, ns, "workloads", name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def wl_condition(wl: dict | None, type_: str) -> dict:
    return next((c for c in ((wl or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


def finished(custom, ns: str, name: str) -> None:
    """The Workload is marked Finished right after the job's end is written (status first, then act)."""
    wait_until(lambda: wl_condition(workload(custom, ns, name), "Finished").get("status") == "True", timeout=15,
               what=f"Workload {name} Finished")  # fmt: skip


def restarts(jobs, name: str) -> int:
    return sum(t.get("restartCount", 0) for t in jobs.get(GK, name)["status"].get("tasks") or [])


def pod_creations(jobs, name: str) -> set[str]:
    """Every pod of the job ever seen, by uid."""
    return {p.metadata.uid for p in jobs.pods(name).values()}


def test_the_second_job_gets_no_pod_until_the_first_ends_then_runs(jobs, queue, controller, custom):
    jobs.create(gjob("first", duration="5s"))
    jobs.wait_phase(GK, "first", "Running", timeout=30)
    assert (jobs.condition(GK, "first", "Admitted") or {}).get("status") == "True"
    jobs.reasons("first", "Admitted")
    assert "Admitted" in [e.reason for e in jobs.events("first") if e.type == "Normal"]
    jobs.create(gjob("second", duration="2s"))
    message = wait_until(lambda: (jobs.condition(GK, "second", "Admitted") or {}).get("message", "").startswith("couldn't")
                         and jobs.condition(GK, "second", "Admitted")["message"], timeout=20, what="second waits")  # fmt: skip
    assert "insufficient unused quota for nvidia.com/gpu" in message
    assert jobs.phase(GK, "second") == "Pending"
    while jobs.phase(GK, "first") != "Succeeded":  # the whole time the first runs, the second has no pod
        assert jobs.pods("second") == {}, "a pod of the second job exists before its admission"
        time.sleep(0.2)
    finished(custom, jobs.ns, "genericjob-first")
    jobs.wait_phase(GK, "second", "Running", "Succeeded", timeout=30)
    jobs.wait_phase(GK, "second", "Succeeded", timeout=30)
    assert sorted(jobs.pods("second")) == ["second-worker-0", "second-worker-1", "second-worker-2"]


def test_a_higher_priority_job_preempts_a_running_lower_one_which_finishes_after_it(jobs, queue, controller):
    jobs.create(gjob("low", duration="8s", priority=1))
    jobs.wait_phase(GK, "low", "Running", timeout=30)
    first_pods = pod_creations(jobs, "low")
    jobs.create(gjob("high", duration="3s", priority=100))
    # The Event stays; the condition's Evicted reason lasts only until the pods are gone.
    evicted = wait_until(lambda: [e for e in jobs.events("low") if e.reason == "Evicted"], timeout=30, what="low evicted")
    assert "Preempted" in evicted[0].message
    assert evicted[0].type == "Normal"
    wait_until(lambda: jobs.live_pods("low") == {}, timeout=30, what="low's pods deleted")
    assert jobs.phase(GK, "low") == "Pending"  # the preemptor runs 3 s: low waits in its queue meanwhile
    assert (jobs.condition(GK, "low", "Admitted") or {}).get("status") == "False"
    jobs.wait_phase(GK, "high", "Succeeded", timeout=60)
    jobs.wait_phase(GK, "low", "Succeeded", timeout=60)
    assert jobs.get(GK, "high")["status"]["conditions"]
    high_end = next(c for c in jobs.get(GK, "high")["status"]["conditions"] if c["type"] == "Completed")["lastTransitionTime"]
    low_end = next(c for c in jobs.get(GK, "low")["status"]["conditions"] if c["type"] == "Completed")["lastTransitionTime"]
    assert low_end >= high_end
    assert pod_creations(jobs, "low").isdisjoint(first_pods)  # ran again, from new pods
    assert restarts(jobs, "low") == 0  # an eviction spends no restart
    [entry] = jobs.get(GK, "low")["status"]["restartHistory"]  # but it is on record, with its cause
    assert (entry["replica"], entry["counted"]) == ("all replicas", False)
    assert entry["cause"].startswith("Evicted by Kueue (Preempted)")


def test_an_ascendjob_with_queue_and_min_available_is_admitted_partially_and_runs_at_that_size(jobs, queue, controller, custom):
    npu = {"huawei.com/Ascend910": "1"}
    container = {"name": "ascend", "image": "img", "command": ["bash", "train.sh"], "resources": {"limits": npu, "requests": npu}}
    job = {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob",
           "metadata": {"name": "ac", "labels": {"framework": "pytorch"}},
           "spec": {"runPolicy": {"schedulingPolicy": {"queue": queue, "minAvailable": 2}},
                    "replicaSpecs": {t: {"replicas": n, "restartPolicy": "Never",
                                         "template": {"spec": {"containers": [dict(container)]}}}
                                     for t, n in (("Master", 1), ("Worker", 2))}}}  # fmt: skip
    jobs.create(job)
    wl = wait_until(lambda: workload(custom, jobs.ns, "ascendjob-ac"), timeout=20, what="AscendJob's Workload")
    assert [(p["name"], p["count"], p.get("minCount")) for p in wl["spec"]["podSets"]] == [("master", 1, None), ("worker", 2, 1)]
    jobs.wait_condition("AscendJob", "ac", "Running", timeout=60)
    # 2 NPUs of quota: the leader and one worker, WORLD_SIZE as the admitted size.
    assert sorted(jobs.pods("ac")) == ["ac-master-0", "ac-worker-0"]
    worker = jobs.pods("ac")["ac-worker-0"]
    env = {e.name: e.value for e in next(c for c in worker.spec.containers if c.name == "ascend").env}
    assert env["WORLD_SIZE"] == "2"
    assert (jobs.condition("AscendJob", "ac", "Admitted") or {}).get("status") == "True"
    assert "GangSchedulingNotEnforced" not in [e.reason for e in jobs.events("ac")]


def test_a_controller_killed_between_admission_and_pod_creation_creates_the_pods_once_when_back(
    jobs, queue, controller_factory, custom
):
    ctl = controller_factory()
    jobs.create(gjob("blocker", duration=None))  # runs until deleted
    jobs.wait_phase(GK, "blocker", "Running", timeout=30)
    jobs.create(gjob("waiter", duration="2s"))
    wait_until(lambda: workload(custom, jobs.ns, "genericjob-waiter"), timeout=20, what="waiter's Workload")
    wait_until(lambda: jobs.phase(GK, "waiter") == "Pending", timeout=20, what="waiter pending")
    ctl.kill()
    jobs.delete(GK, "blocker")  # its Workload goes with it (ownerReference); Kueue admits the waiter
    wait_until(lambda: workload(custom, jobs.ns, "genericjob-blocker") is None, timeout=30, what="blocker's Workload collected")
    wait_until(lambda: wl_condition(workload(custom, jobs.ns, "genericjob-waiter"), "Admitted").get("status") == "True",
               timeout=30, what="waiter admitted by Kueue")  # fmt: skip
    time.sleep(1)
    assert jobs.pods("waiter") == {}  # nobody has acted on the admission yet
    controller_factory()
    jobs.wait_phase(GK, "waiter", "Succeeded", timeout=60)
    assert sorted(jobs.pods("waiter")) == ["waiter-worker-0", "waiter-worker-1", "waiter-worker-2"]
    assert restarts(jobs, "waiter") == 0
    jobs.reasons("waiter", "Admitted")
    admitted = [e for e in jobs.events("waiter") if e.reason == "Admitted"]
    assert len(admitted) == 1


def test_kueue_stopped_while_jobs_wait_no_pod_appears_and_admission_resumes_when_it_returns(jobs, queue, controller, custom):
    jobs.create(gjob("blocker", duration=None))
    jobs.wait_phase(GK, "blocker", "Running", timeout=30)
    jobs.create(gjob("waiting", duration="2s"))
    wait_until(lambda: (jobs.condition(GK, "waiting", "Admitted") or {}).get("reason") == "Pending", timeout=20,
               what="waiting pending in its queue")  # fmt: skip
    subprocess.run([str(SCRIPT), "kueue", "down"], check=True)
    try:
        jobs.delete(GK, "blocker")  # quota frees, but nobody can admit
        jobs.create(gjob("late", duration="2s"))  # its Workload cannot even be created: the webhook is down
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            assert jobs.pods("waiting") == {}, "a pod exists without admission"
            assert jobs.pods("late") == {}, "a pod exists without admission"
            time.sleep(0.3)
        assert workload(custom, jobs.ns, "genericjob-late") is None
        assert jobs.phase(GK, "late") in (None, "Pending")
    finally:
        subprocess.run([str(SCRIPT), "kueue", "up"], check=True)
    jobs.wait_phase(GK, "waiting", "Succeeded", timeout=90)
    jobs.wait_phase(GK, "late", "Succeeded", timeout=90)


# -- the Airflow side: operator and trigger against the same Kueue -----------------------------


@pytest.fixture
def conn(monkeypatch, cluster, namespace):
    extra = f'{{"kube_config_path": "{cluster.kubeconfig}", "namespace": "{namespace}"}}'
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", f'{{"conn_type": "kubernetes", "extra": {extra}}}')


def deferred_trigger(**kw):
    from datetime import datetime

    from airflow.sdk import DAG
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_t9k.operators.kinds import GenericJobOperator
    from tests.support.task import context

    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        operator = GenericJobOperator(task_id="train", image="busybox", replicas=3, deferrable=True, queue_name="gpu",
                                      container_resources={"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}},
                                      pod_annotations={f"{SIM}/duration": "2s"}, **kw)  # fmt: skip
    with pytest.raises(TaskDeferred) as exc:
        operator.execute(context())
    return exc.value.trigger


async def first_event(trigger, timeout=90):
    import asyncio

    return (await asyncio.wait_for(trigger.run().__anext__(), timeout)).payload


@pytest.mark.asyncio
async def test_the_task_log_says_waiting_in_queue_and_startup_timeout_does_not_count_the_wait(
    conn, jobs, queue, controller, capsys
):
    import asyncio

    jobs.create(gjob("blocker", duration=None))
    jobs.wait_phase(GK, "blocker", "Running", timeout=30)
    trigger = deferred_trigger(startup_timeout=3)
    waiting = asyncio.create_task(first_event(trigger))
    await asyncio.sleep(6)  # twice the startup timeout, all of it in the queue
    assert not waiting.done(), waiting.result() if waiting.done() else None
    jobs.delete(GK, "blocker")
    event = await waiting
    assert (event["status"], event["phase"]) == ("success", "Succeeded")
    text = capsys.readouterr().out  # the task log (Airflow's structlog writes it there)
    assert "waiting in queue gpu: couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu" in text
    assert "admitted from queue gpu: Admitted by ClusterQueue" in text


@pytest.mark.asyncio
async def test_queue_timeout_ends_the_wait_with_kueues_reason(conn, jobs, queue, controller):
    jobs.create(gjob("blocker", duration=None))
    jobs.wait_phase(GK, "blocker", "Running", timeout=30)
    event = await first_event(deferred_trigger(queue_timeout=4))
    assert event["status"] == "timeout"
    assert "was not admitted within queue_timeout=4s: waiting in queue gpu: couldn't assign flavors" in event["message"]
    assert jobs.pods(event["name"]) == {}


from tests.integration.test_airflow_dags import airflow_home, ok, run_dag  # noqa: E402,F401 - fixtures for real Airflow


def test_example_dag_two_training_tasks_on_one_queue(queue, run_dag, jobs, custom):
    out = ok(run_dag("example_queue"))
    assert out.count("admitted from queue gpu") >= 2, out[-4000:]
    workloads = custom.list_namespaced_custom_object(*KUEUE, jobs.ns, "workloads")["items"]
    assert len(workloads) == 2
    assert sorted(w["spec"]["priority"] for w in workloads) == [10, 20]
    for w in workloads:
        finished(custom, jobs.ns, w["metadata"]["name"])


def test_queueing_off_runs_a_queued_job_without_kueue_and_says_why(jobs, queue, controller_factory, custom):
    controller_factory("--queueing=off")
    jobs.create(gjob("plain", duration="2s"))
    jobs.wait_phase(GK, "plain", "Succeeded", timeout=30)
    assert workload(custom, jobs.ns, "genericjob-plain") is None
    cond = jobs.condition(GK, "plain", "QueueAdmission")
    assert (cond["status"], cond["reason"]) == ("False", "NotEnforced")
    assert "--queueing=off" in cond["message"]


def test_auto_without_a_localqueue_of_that_name_records_the_queue_only(jobs, queue, controller, custom):
    jobs.create(gjob("elsewhere", duration="2s", queue="no-such-queue"))
    jobs.wait_phase(GK, "elsewhere", "Succeeded", timeout=30)
    assert workload(custom, jobs.ns, "genericjob-elsewhere") is None
    assert "has no LocalQueue 'no-such-queue'" in jobs.condition(GK, "elsewhere", "QueueAdmission")["message"]


def test_queueing_kueue_holds_a_job_whose_localqueue_is_missing_with_kueues_message(jobs, queue, controller_factory, custom):
    controller_factory("--queueing=kueue")
    jobs.create(gjob("lost", duration="2s", queue="no-such-queue"))
    wait_until(lambda: workload(custom, jobs.ns, "genericjob-lost"), timeout=20, what="Workload created")
    message = wait_until(lambda: (jobs.condition(GK, "lost", "Admitted") or {}).get("reason") not in (None, "Queueing")
                         and jobs.condition(GK, "lost", "Admitted")["message"], timeout=20, what="Kueue's verdict")  # fmt: skip
    assert "no-such-queue" in message
    time.sleep(2)
    assert jobs.pods("lost") == {}


def test_the_shipped_namespace_rbac_is_enough_for_admission_eviction_and_finish(
    api_client, cluster, namespace, jobs, queue, controller_factory, custom, tmp_path
):
    from tests.integration.test_controller_runtime import _rbac_kubeconfig
    from tests.support.rbac import delete_cluster_scoped

    kubeconfig, docs = _rbac_kubeconfig(api_client, cluster, namespace, "rbac-namespace.yaml", tmp_path)
    try:
        ctl = controller_factory(kubeconfig=kubeconfig)
        jobs.create(gjob("low", duration="5s", priority=1))
        jobs.wait_phase(GK, "low", "Running", timeout=30)
        jobs.create(gjob("high", duration="2s", priority=100))
        # The Event stays; the condition's Evicted reason lasts only until the pods are gone.
        wait_until(lambda: "Evicted" in [e.reason for e in jobs.events("low")], timeout=30, what="low evicted")
        jobs.wait_phase(GK, "high", "Succeeded", timeout=60)
        jobs.wait_phase(GK, "low", "Succeeded", timeout=60)
        for name in ("genericjob-low", "genericjob-high"):
            finished(custom, jobs.ns, name)
        assert "forbidden" not in ctl.tail(400).lower()
    finally:
        delete_cluster_scoped(api_client, docs)


def test_t9k_scheduler_without_a_queue_goes_to_localqueue_default_at_priority_50(jobs, queue, controller, custom):
    """Seeds 001/003: t9kScheduler means queue "default", priority 50, unless the job says otherwise."""
    custom.create_namespaced_custom_object(*KUEUE, jobs.ns, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default"},
        "spec": {"clusterQueue": f"cq-{jobs.ns}"}})  # fmt: skip
    job = gjob("seeded", replicas=1, duration="2s")
    job["spec"]["scheduler"] = {"t9kScheduler": {}}
    jobs.create(job)
    jobs.wait_phase(GK, "seeded", "Succeeded", timeout=60)
    wl = workload(custom, jobs.ns, "genericjob-seeded")
    assert (wl["spec"]["queueName"], wl["spec"]["priority"]) == ("default", 50)
    pod = jobs.pods("seeded")["seeded-worker-0"]
    assert pod.metadata.labels["scheduler.tensorstack.dev/queue"] == "default"
    assert pod.metadata.annotations["scheduler.tensorstack.dev/priority"] == "50"
