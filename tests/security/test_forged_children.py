"""Attacks on which children are a job's (issue 29, items 2 and 4), by a co-tenant with ordinary
edit rights (a real ServiceAccount token bound to Kubernetes' ``edit`` ClusterRole): a pod with a
forged controller ownerReference naming the victim job (a uid is no secret), made in the job's
namespace before the controller makes its replica, or in another namespace; a pre-made Service
of a replica's name; a pod copying a replica's labels; and a job of another kind under the same
name. None of them may become the job's replica, decide its outcome or its result, or take its
rendezvous address; the job fails naming what is in its way, and nothing of the attacker's is
deleted."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kubernetes import client

from tests.builders import generic, pytorch
from tests.security.test_ssh_launch import _edit_identity
from tests.support.cluster import wait_until

if TYPE_CHECKING:
    from tests.support.jobs import Jobs

FORGED_RESULT = "forged result: model s3://attacker/model"
GJ = "GenericJob"


def _victim(jobs: Jobs, name: str, seconds: str = "4s", message: str = "the real result") -> dict:
    job = generic(name, ("worker", 1))
    job["spec"]["replicaSpecs"][0]["template"]["metadata"] = {
        "annotations": {"sim.t9k.test/duration": seconds, "sim.t9k.test/message": message}}  # fmt: skip
    return jobs.create(job)


def _forged_pod(name: str, victim: dict, extra_owner: dict | None = None) -> dict:
    ref = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "name": victim["metadata"]["name"],
           "uid": victim["metadata"]["uid"], "controller": True}  # fmt: skip
    labels = {"batch.tensorstack.dev/job-name": victim["metadata"]["name"], "batch.tensorstack.dev/job-kind": GJ,
              "batch.tensorstack.dev/replica-type": "worker", "batch.tensorstack.dev/replica-index": "0",
              "app.kubernetes.io/managed-by": "airflow-t9k"}  # fmt: skip
    return {"metadata": {"name": name, "labels": labels, "ownerReferences": [ref, *([extra_owner] if extra_owner else [])],
                         "annotations": {"sim.t9k.test/duration": "1s", "sim.t9k.test/message": FORGED_RESULT}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}  # fmt: skip


def _failed(jobs: Jobs, kind: str, name: str) -> str:
    done = jobs.wait_phase(kind, name, "Failed", "Succeeded", timeout=40)
    assert done["status"]["phase"] == "Failed", done["status"]
    return next(c for c in done["status"]["conditions"] if c["type"] == "Failed")["message"]


def test_a_pod_forged_in_the_jobs_namespace_before_its_replica_is_refused(
    jobs, controller_factory, core, api_client, cluster, namespace, tmp_path
):
    """No race needed: the job exists, the controller has not made its replica yet (here: not
    running yet; in life, a job waiting in a queue). The forged pod would succeed at once with
    the attacker's result as the job's."""
    tenant = _edit_identity(core, api_client, cluster, namespace, tmp_path)
    victim = _victim(jobs, "victim")
    tenant.create_namespaced_pod(namespace, _forged_pod("victim-worker-0", victim))
    controller_factory()
    message = _failed(jobs, GJ, "victim")
    assert "Pod victim-worker-0 already exists and was not created by the controller for this job" in message, message
    status = jobs.get(GJ, "victim")["status"]
    assert FORGED_RESULT not in str(status.get("result")), status
    assert FORGED_RESULT not in str(status.get("tasks")), status
    assert core.read_namespaced_pod("victim-worker-0", namespace).metadata.uid  # not the controller's to delete


def test_a_pod_forged_in_another_namespace_is_no_replica(
    jobs, controller_factory, core, api_client, cluster, namespace, tmp_path
):
    """The attacker's own namespace: a pod named as the victim's replica, its controller
    reference naming the victim (a second owner in that namespace keeps the garbage collector
    from removing it). The victim's replica is made in the victim's namespace and decides."""
    other = f"t9k-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other, labels={"airflow-t9k/test": "true"})))
    try:
        wait_until(lambda: core.list_namespaced_service_account(other).items, timeout=30, what="default SA")
        tenant = _edit_identity(core, api_client, cluster, other, tmp_path)
        anchor = tenant.create_namespaced_config_map(other, {"metadata": {"name": "anchor"}})
        keep = {"apiVersion": "v1", "kind": "ConfigMap", "name": "anchor", "uid": anchor.metadata.uid}
        victim = _victim(jobs, "victim", seconds="6s")
        tenant.create_namespaced_pod(other, _forged_pod("victim-worker-0", victim, keep))
        controller_factory("-n", other)
        done = jobs.wait_phase(GJ, "victim", "Succeeded", "Failed", timeout=40)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        replica = done["status"]["tasks"][0]["status"][0]
        real = jobs.core.read_namespaced_pod("victim-worker-0", namespace)
        assert replica["uid"] == real.metadata.uid, (replica, real.metadata.uid)
        assert FORGED_RESULT not in str(done["status"]), done["status"]
    finally:
        core.delete_namespace(other, propagation_policy="Background")


def test_a_pre_made_service_of_a_replicas_name_is_refused(
    jobs, controller_factory, core, api_client, cluster, namespace, tmp_path
):
    """The Service is the replica's rendezvous address (MASTER_ADDR, torch elastic's c10d store,
    which unpickles what it is sent): one the attacker made first would send it elsewhere."""
    tenant = _edit_identity(core, api_client, cluster, namespace, tmp_path)
    victim = _victim(jobs, "victim")
    premade = {"metadata": {"name": "victim-worker-0"}, "spec": {"selector": {"app": "attacker"}, "ports": [{"port": 29500}]}}
    tenant.create_namespaced_service(namespace, premade)
    controller_factory()
    message = _failed(jobs, GJ, "victim")
    assert "Service victim-worker-0 already exists and was not created by the controller for this job" in message, message
    assert core.read_namespaced_service("victim-worker-0", namespace).spec.selector == {"app": "attacker"}
    # The replica's pod goes out with its Service (one wave): made beside a Service that is someone
    # else's, it is deleted at once, without grace, and is not on the job's record.
    selector = f"batch.tensorstack.dev/job-uid={victim['metadata']['uid']}"
    wait_until(lambda: not core.list_namespaced_pod(namespace, label_selector=selector).items, timeout=30,
               what="the pod made beside the attacker's Service gone")  # fmt: skip
    created = (jobs.get(GJ, "victim").get("status") or {}).get("created") or {}
    assert "uid" not in created.get("Pod", {}).get("victim-worker-0", {}), created  # a decision at most, no pod


def test_a_pod_copying_a_replicas_labels_is_not_behind_its_service(
    jobs, controller, core, api_client, cluster, namespace, tmp_path
):
    tenant = _edit_identity(core, api_client, cluster, namespace, tmp_path)
    victim = _victim(jobs, "victim", seconds="60s")
    wait_until(lambda: jobs.live_pods("victim"), timeout=30, what="the replica")
    impostor = _forged_pod("impostor", victim)
    impostor["metadata"]["ownerReferences"] = []
    tenant.create_namespaced_pod(namespace, impostor)

    def addresses() -> dict[str, str] | None:
        pods = {p.metadata.name: p.status.pod_ip for p in core.list_namespaced_pod(namespace).items if p.status.pod_ip}
        if {"victim-worker-0", "impostor"} - set(pods):
            return None
        eps = core.read_namespaced_endpoints("victim-worker-0", namespace)
        ips = {a.ip for s in eps.subsets or [] for a in (s.addresses or []) + (s.not_ready_addresses or [])}
        return {name: ip for name, ip in pods.items() if ip in ips} or None

    behind = wait_until(addresses, timeout=30, what="the Service's endpoints")
    assert set(behind) == {"victim-worker-0"}, behind
    selector = core.read_namespaced_service("victim-worker-0", namespace).spec.selector
    assert selector["batch.tensorstack.dev/job-uid"] == victim["metadata"]["uid"], selector


def test_a_same_named_job_of_another_kind_cannot_take_the_others_replicas(jobs, controller):
    first = _victim(jobs, "twin", seconds="60s")
    wait_until(lambda: jobs.phase(GJ, "twin") == "Running", timeout=30, what="the GenericJob running")
    second = pytorch("twin", ("worker", 1))
    second["metadata"].pop("namespace", None)
    jobs.create(second)
    message = _failed(jobs, "PyTorchTrainingJob", "twin")
    assert "twin-worker-0 already exists and was not created by the controller for this job" in message, message
    assert f"its controller is GenericJob twin (uid {first['metadata']['uid']})" in message, message
    assert jobs.phase(GJ, "twin") == "Running"
    pod = jobs.core.read_namespaced_pod("twin-worker-0", jobs.ns)
    assert pod.metadata.owner_references[0].uid == first["metadata"]["uid"]
    assert not pod.metadata.deletion_timestamp
