"""The chart's other watch scopes, each with the RBAC variant it renders: the namespace-scoped one
(a Role in each listed namespace, no cluster-wide rights on jobs) reconciles only its namespaces
and says which at start; `all` reconciles every namespace but the excluded ones, which it names
on the jobs there. Neither puts the shared release back to the default scope, nor starts from
it (`release_as_left`): the next test that needs the defaults puts them back (the `release`
fixture), and the next scope test goes straight from one variant to the other, a rollout less
each."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import wait_until
from tests.support.deploy import CONTROLLER, NAMESPACE
from tests.support.jobs import Jobs

GK = "GenericJob"


def _job(name: str) -> dict:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GK, "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {
                "metadata": {"annotations": {"sim.t9k.test/duration": "2s"}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]}}  # fmt: skip


def _exists(read) -> bool:
    try:
        read()
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def test_the_namespace_scoped_variant_reconciles_only_its_namespaces(release_as_left, api_client, managed, unmanaged):
    release = release_as_left
    """Listed: `unmanaged` (unlabelled). Not listed: `managed`, though the default scope's label is on it."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    release.upgrade({"scope.mode": "namespaces", "scope.namespaces": [unmanaged]})
    release.wait_ready()
    assert _exists(lambda: rbac.read_namespaced_role(CONTROLLER, unmanaged))
    assert not _exists(lambda: rbac.read_cluster_role(CONTROLLER))  # no rights on jobs elsewhere
    assert not _exists(lambda: rbac.read_namespaced_role(CONTROLLER, managed))
    listed, other = Jobs(api_client, unmanaged), Jobs(api_client, managed)
    other.create(_job("elsewhere"))
    listed.create(_job("here"))
    done = listed.wait_phase(GK, "here", "Succeeded", "Failed", timeout=60)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    time.sleep(3)  # as long again as the listed job took to start: the other is not merely late
    assert other.get(GK, "elsewhere").get("status") is None
    assert other.pods("elsewhere") == {}
    log = release.logs()[release.leader()]
    assert f" in {unmanaged} (never " in log, log[-3000:]  # its namespaces, and only those
    assert "selector none" in log, log[-3000:]


def _has_exclude_flag() -> bool:
    out = subprocess.run([sys.executable, "-m", "airflow_t9k.cli", "controller", "--help"], capture_output=True, text=True,
                         check=False)  # fmt: skip
    return "--exclude-namespace" in out.stdout


def test_the_all_namespaces_variant_leaves_the_excluded_ones_alone(release_as_left, api_client, managed, unmanaged):
    release = release_as_left
    if not _has_exclude_flag():  # issue 29 adds it; without it this variant's pods would not start
        pytest.fail("the controller has no --exclude-namespace flag (issue 29), which scope.mode=all renders")
    release.upgrade({"scope.mode": "all", "scope.exclude": ["airflow", managed]})
    release.wait_ready()
    anywhere, excluded = Jobs(api_client, unmanaged), Jobs(api_client, managed)
    anywhere.create(_job("anywhere"))
    excluded.create(_job("excluded"))
    done = anywhere.wait_phase(GK, "anywhere", "Succeeded", "Failed", timeout=60)
    assert done["status"]["phase"] == "Succeeded", done["status"]  # unlabelled, and still reconciled
    cond = wait_until(lambda: excluded.condition(GK, "excluded", "NamespaceNotManaged"), timeout=30,
                      what="NamespaceNotManaged on the excluded namespace's job")  # fmt: skip
    assert managed in cond["message"], cond
    assert excluded.pods("excluded") == {}
    args = release.apps.read_namespaced_deployment(CONTROLLER, NAMESPACE).spec.template.spec.containers[0].args
    assert f"--exclude-namespace={managed}" in args
