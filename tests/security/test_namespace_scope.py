"""Attack: a DAG author creates a job in kube-system (or any namespace the platform did not hand
to training) to get pods there. With the shipped defaults the controller gives it no pod and
says so on the job, once; ``--namespace-selector`` narrows the namespaces further."""

from __future__ import annotations

import time
import uuid

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from airflow_t9k.controller.scope import NOT_MANAGED
from tests.builders import generic
from tests.integration.test_airflow_rbac import _apply_rbac
from tests.support.cluster import wait_until
from tests.support.jobs import Jobs
from tests.support.rbac import delete_cluster_scoped


def _job(name: str) -> dict:
    job = generic(name, ("worker", 1))
    # What an attacker would put in the template: none of it may reach a pod.
    pod = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    pod["hostPID"] = True
    pod["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
    return job


def _not_managed_once(jobs: Jobs, name: str) -> None:
    cond = jobs.wait_condition("GenericJob", name, NOT_MANAGED, timeout=30)["status"]["conditions"]
    assert any(c["type"] == NOT_MANAGED and c["status"] == "True" for c in cond)
    jobs.reasons(name, NOT_MANAGED)
    time.sleep(3)  # further passes (the status write itself brings one) add nothing
    assert [e.reason for e in jobs.events(name)].count(NOT_MANAGED) == 1
    assert jobs.pods(name) == {}


def test_the_default_airflow_rbac_cannot_create_a_job_in_kube_system(api_client, cluster, namespace, crds, tmp_path):
    """The shipped default (deploy/rbac-airflow-namespace.yaml): a worker's real token."""
    kubeconfigs, _ = _apply_rbac(api_client, cluster, namespace, "rbac-airflow-namespace.yaml", tmp_path)
    worker = Jobs(config.new_client_from_config(config_file=str(kubeconfigs["worker"])), "kube-system")
    try:
        worker.create(_job(f"escape-{uuid.uuid4().hex[:6]}"))
    except ApiException as exc:
        status, body = exc.status, exc.body
    else:
        raise AssertionError("the namespace-scoped worker created a job in kube-system")
    assert status == 403, body


def test_a_job_in_kube_system_gets_no_pod(api_client, cluster, namespace, crds, controller_factory, tmp_path):
    """The cluster-wide Airflow RBAC lets a worker create it; the controller gives it no pod."""
    kubeconfigs, docs = _apply_rbac(api_client, cluster, namespace, "rbac-airflow-cluster.yaml", tmp_path)
    admin = Jobs(api_client, "kube-system")
    worker = Jobs(config.new_client_from_config(config_file=str(kubeconfigs["worker"])), "kube-system")
    name = f"escape-{uuid.uuid4().hex[:6]}"
    try:
        worker.create(_job(name))  # RBAC allows it: what stops it is the controller
        controller_factory(ns="kube-system")
        _not_managed_once(admin, name)
    finally:
        try:
            admin.delete("GenericJob", name)
        finally:
            delete_cluster_scoped(api_client, docs)


def test_the_namespace_selector_narrows_and_follows_relabelling(api_client, core, namespace, crds, controller_factory):
    other = f"t9k-test-{uuid.uuid4().hex[:8]}"
    key = f"sec-{uuid.uuid4().hex[:6]}.airflow-t9k.io/jobs"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other, labels={"airflow-t9k/test": "true"})))
    try:
        wait_until(lambda: core.list_namespaced_service_account(other).items, timeout=30, what="default SA")
        core.patch_namespace(namespace, {"metadata": {"labels": {key: "enabled"}}})
        managed, unmanaged = Jobs(api_client, namespace), Jobs(api_client, other)
        managed.create(generic("ok", ("worker", 1)))
        unmanaged.create(generic("left", ("worker", 1)))
        controller_factory("-n", other, "--namespace-selector", f"{key}=enabled", ns=namespace)
        wait_until(lambda: managed.pods("ok"), timeout=30, what="pods of the job in the selected namespace")
        _not_managed_once(unmanaged, "left")
        core.patch_namespace(other, {"metadata": {"labels": {key: "enabled"}}})
        wait_until(lambda: unmanaged.pods("left"), timeout=30, what="pods once the namespace is selected")
        assert unmanaged.condition("GenericJob", "left", NOT_MANAGED)["status"] == "False"
    finally:
        core.delete_namespace(other, propagation_policy="Background")


def test_airflows_own_namespace_excluded_gets_no_pod(api_client, cluster, core, namespace, crds, controller_factory, tmp_path):
    """Issue 29, 6: the cluster-wide Airflow RBAC lets a DAG author create a job in Airflow's own
    namespace (here ``namespace``, where the worker's ServiceAccount lives, with a Secret like
    Airflow's fernet key) whose pod mounts that Secret. A controller run cluster-wide with
    ``--exclude-namespace`` for it gives the job no pod."""
    kubeconfigs, docs = _apply_rbac(api_client, cluster, namespace, "rbac-airflow-cluster.yaml", tmp_path)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "airflow-fernet-key"}, "stringData": {"fernet-key": "k"}})
    worker = Jobs(config.new_client_from_config(config_file=str(kubeconfigs["worker"])), namespace)
    name = f"steal-{uuid.uuid4().hex[:6]}"
    job = generic(name, ("worker", 1))
    pod = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    pod["volumes"] = [{"name": "fernet", "secret": {"secretName": "airflow-fernet-key"}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "fernet", "mountPath": "/stolen"}]
    try:
        worker.create(job)  # RBAC allows it: what stops it is the controller
        controller_factory("--exclude-namespace", namespace)
        _not_managed_once(Jobs(api_client, namespace), name)
        cond = Jobs(api_client, namespace).condition("GenericJob", name, NOT_MANAGED)
        assert "--exclude-namespace" in cond["message"], cond
    finally:
        delete_cluster_scoped(api_client, docs)


def test_two_controllers_on_one_job_settle_with_the_one_that_manages_it(namespace, jobs, crds, controller_factory):
    """A cluster-wide controller whose selector leaves a namespace out (here one watching only
    ``namespace``, with a selector its labels do not match) and a namespaced one that manages
    it. The first says NamespaceNotManaged, the second turns that false and runs the job, and
    the first then leaves it alone: before, each undid the other's write on every watch event,
    for ever, with a Warning Event each time."""
    key = f"sec-{uuid.uuid4().hex[:6]}.airflow-t9k.io/jobs"
    controller_factory("--namespace-selector", f"{key}=enabled")
    jobs.create(generic("both", ("worker", 1)))
    _not_managed_once(jobs, "both")
    controller_factory()  # the namespace's own
    wait_until(lambda: jobs.pods("both"), timeout=30, what="pods from the controller that manages the namespace")
    wait_until(lambda: (jobs.condition("GenericJob", "both", NOT_MANAGED) or {}).get("status") == "False", timeout=30,
               what="NamespaceNotManaged turned false")  # fmt: skip
    time.sleep(5)  # the two controllers' watches have each seen the other's last write many times over
    assert jobs.condition("GenericJob", "both", NOT_MANAGED)["status"] == "False"
    assert [e.reason for e in jobs.events("both")].count(NOT_MANAGED) == 1
