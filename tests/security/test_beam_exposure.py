"""Attack: a DAG author (a worker's real token, bound to the shipped namespace Role) asks for a
BeamJob whose JobManager Service is a NodePort or LoadBalancer. Flink's REST API has no
authentication, so that would let anyone who reaches a node upload and run code in the job's
pods, through the controller's right to create Services. The controller makes no such Service
unless started with --allow-beam-external-service (the job fails saying so), and the shipped
admission policy refuses the job itself."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import config
from kubernetes.client.exceptions import ApiException

from tests.integration.test_airflow_rbac import _apply_rbac
from tests.integration.test_beamjob import beam
from tests.security.test_admission import _effective, policy  # noqa: F401 - the policy fixture
from tests.support.cluster import wait_until
from tests.support.jobs import Jobs

EXTERNAL = {"NodePort": "NodePort", "External": "LoadBalancer", "VPC": "LoadBalancer"}


def _author(api_client, cluster, namespace, tmp_path) -> Jobs:
    kubeconfigs, _ = _apply_rbac(api_client, cluster, namespace, "rbac-airflow-namespace.yaml", tmp_path)
    return Jobs(config.new_client_from_config(config_file=str(kubeconfigs["worker"])), namespace)


def _exposed(jobs: Jobs) -> list[str]:
    return [f"{s.metadata.name}: {s.spec.type}" for s in jobs.core.list_namespaced_service(jobs.ns).items
            if s.spec.type in ("NodePort", "LoadBalancer")]  # fmt: skip


@pytest.mark.parametrize("scope", sorted(EXTERNAL))
def test_a_beamjob_gets_no_external_service_by_default(jobs, controller, api_client, cluster, namespace, tmp_path, scope):
    author = _author(api_client, cluster, namespace, tmp_path)
    name = f"bj-{scope.lower()}"
    author.create(beam(name, jobManager={"accessScope": scope}))
    done = jobs.wait_phase("BeamJob", name, "Failed", timeout=30)
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], "--allow-beam-external-service" in failed["message"]) == ("InvalidSpec", True), failed
    assert (_exposed(jobs), jobs.pods(name)) == ([], {})


def test_the_flag_lets_the_platform_expose_it(jobs, controller_factory):
    controller_factory("--allow-beam-external-service")
    jobs.create(beam("bj-open", jobManager={"accessScope": "NodePort"}))
    wait_until(lambda: _exposed(jobs) == ["bj-open-flinkcluster-jobmanager: NodePort"], timeout=30, what="the NodePort Service")


@pytest.mark.parametrize("scope", sorted(EXTERNAL))
def test_the_admission_policy_refuses_an_exposed_beamjob(jobs, policy, api_client, cluster, namespace, tmp_path, scope):
    _effective(jobs)
    author = _author(api_client, cluster, namespace, tmp_path)
    job = beam(f"bj-{uuid.uuid4().hex[:6]}", jobManager={"accessScope": scope})
    with pytest.raises(ApiException) as refused:
        author.create(job)
    body = str(refused.value.body)
    assert (refused.value.status, policy in body, "REST API" in body) == (403, True, True), body
    ok = beam(f"bj-{uuid.uuid4().hex[:6]}", jobManager={"accessScope": "Cluster"})
    author.create(ok)  # an in-cluster JobManager is fine
