"""The push path for progress (docs/progress.md, "The push path") against the real API server:
the controller serves its HTTPS endpoint, every replica it creates gets the URL, CA and a
projected token; tokens minted by the TokenRequest API for real pods, as the kubelet mints
them, are checked by a real TokenReview. A replica's token is taken and its values reach
status.progress; a token of another job's pod, of another audience, of a pod of another
namespace, or of no pod at all is refused. A real replica on the real node:
tests/real/test_progress_push_real.py."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from tests.support.cluster import wait_until
from tests.support.push import CA_ANNOTATION, FROM_HERE, env_of, post, push_flags, token

GJ = "GenericJob"


def running_job(jobs, name: str, replicas: int = 2) -> dict[str, client.V1Pod]:
    """Its pods on the local cluster have this machine's address (FROM_HERE): the test's POSTs
    pass the controller's source check, on as by default."""
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": name},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": replicas, "template": {"spec": {
                     **FROM_HERE, "containers": [{"name": "main", "image": "busybox"}]}}}]}})  # fmt: skip
    jobs.wait_phase(GJ, name, "Running")
    pods = jobs.live_pods(name)
    assert len(pods) == replicas
    return pods


TRAINER_BODY = {"trainerStatus": {"progressPercentage": 30, "estimatedRemainingSeconds": 600,
                                  "lastUpdatedTime": "2026-11-27T10:00:00+00:00",
                                  "metrics": [{"name": "loss", "value": "0.25"}, {"name": "current_step", "value": "300"},
                                              {"name": "total_steps", "value": "1000"},
                                              {"name": "current_epoch", "value": "1.5"}]}}  # fmt: skip


@pytest.mark.parametrize("scope", ["all", "selector"])
def test_a_replica_pushes_with_its_projected_token_and_the_values_reach_the_status(cluster, core, jobs, controller_factory,
                                                                                   scope):  # fmt: skip
    """With --namespace-selector (the chart's default scope) the controller caches pods per
    managed namespace: the endpoint found no pod there and refused every replica (2026-12-01)."""
    _, flags = push_flags(check_source=not cluster.external)
    if scope == "selector":
        key = f"push-{uuid.uuid4().hex[:6]}.airflow-t9k.io/jobs"
        core.patch_namespace(jobs.ns, {"metadata": {"labels": {key: "enabled"}}})
        flags = [*flags, "--namespace-selector", f"{key}=enabled"]
    controller_factory("--progress-interval", "2", *flags)
    pods = running_job(jobs, "push")
    pod = pods["push-worker-1"]  # any replica may push, not only the one whose log is followed
    env = env_of(pod)
    url = env["KUBEFLOW_TRAINER_SERVER_URL"]
    assert url == env["T9K_PROGRESS_URL"]
    assert url.endswith(f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{jobs.ns}/genericjobs/push/progress")
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/airflow-t9k/progress/token"
    volume = next(v for v in pod.spec.volumes if v.name == "t9k-progress")
    assert volume.projected.sources[0].service_account_token.audience == "airflow-t9k-progress"
    ca = pod.metadata.annotations[CA_ANNOTATION]  # what the downward API writes to ca.crt

    code, answer = post(url, token(jobs.core, jobs.ns, pod), TRAINER_BODY, ca)  # Kubeflow Trainer's body, as its SDK sends it
    assert code == 200, answer
    assert answer["accepted"] == {"percent": 30, "eta_seconds": 600, "step": 300, "total_steps": 1000, "epoch": 1.5,
                                  "metrics": {"loss": 0.25}}  # fmt: skip

    def progress() -> dict | None:
        return (jobs.get(GJ, "push").get("status") or {}).get("progress")

    p = wait_until(progress, timeout=30, what="status.progress")
    assert (p["replica"], p["step"], p["totalSteps"], p["epoch"], p["percent"], p["metrics"], p["summary"]) == (
        "push-worker-1",
        300,
        1000,
        1.5,
        30.0,
        {"loss": 0.25},
        "30% 300/1000",
    )
    assert p["etaSeconds"] == 600  # the program's own, until the history shows a rate

    # Our body, from the replica whose log is also followed: merged into the values so far.
    code, answer = post(url, token(jobs.core, jobs.ns, pods["push-worker-0"]), {"step": 400, "acc": 0.5}, ca)
    assert code == 200, answer
    p = wait_until(lambda: (progress() or {}).get("step") == 400 and progress(), timeout=30, what="step 400 in status.progress")
    assert (p["replica"], p["totalSteps"], p["metrics"]) == ("push-worker-0", 1000, {"loss": 0.25, "acc": 0.5})


def test_tokens_of_another_job_another_audience_another_namespace_or_no_pod_are_refused(cluster, jobs, controller_factory):
    _, flags = push_flags(check_source=not cluster.external)
    controller_factory("--progress-interval", "2", *flags)
    mine = running_job(jobs, "mine", replicas=1)["mine-worker-0"]
    theirs = running_job(jobs, "theirs", replicas=1)["theirs-worker-0"]
    url, ca = env_of(mine)["T9K_PROGRESS_URL"], mine.metadata.annotations[CA_ANNOTATION]
    body = {"step": 1, "loss": 1.0}

    code, answer = post(url, token(jobs.core, jobs.ns, theirs), body, ca)  # a replica of another job
    assert (code, answer["reason"]) == (403, "Forbidden")
    assert "theirs-worker-0 is not a replica of GenericJob" in answer["message"]
    code, answer = post(url, token(jobs.core, jobs.ns, mine, audience="https://kubernetes.default.svc.cluster.local"), body, ca)
    assert code == 401
    assert "audience" in answer["message"]  # the API server's own audience: not ours
    code, answer = post(url, token(jobs.core, jobs.ns, None), body, ca)  # a token of the service account, of no pod
    assert code == 401
    assert "not bound to a pod" in answer["message"]
    code, answer = post(url, "garbage", body, ca)
    assert code == 401
    head, claims, signature = token(jobs.core, jobs.ns, mine).split(".")
    forged = f"{head}.{claims}.{signature[::-1]}"  # its claims are right; the API server's TokenReview says no
    code, answer = post(url, forged, body, ca)
    assert code == 401
    assert "did not accept the token" in answer["message"]
    code, answer = post(url, None, body, ca)
    assert code == 401

    other = f"t9k-test-{uuid.uuid4().hex[:8]}"  # a pod of another namespace, under the same name
    jobs.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other, labels={"airflow-t9k/test": "true"})))
    try:
        wait_until(lambda: jobs.core.list_namespaced_service_account(other).items, timeout=30, what="its serviceaccount")
        spec = {"containers": [{"name": "c", "image": "busybox"}]}
        stranger = jobs.core.create_namespaced_pod(other, {"metadata": {"name": "mine-worker-0"}, "spec": spec})
        code, answer = post(url, token(jobs.core, other, stranger), body, ca)
        assert code == 403
        assert f"not in namespace '{jobs.ns}'" in answer["message"]
    finally:
        jobs.core.delete_namespace(other, propagation_policy="Background")

    # A token that was good, after its pod is gone (a restarted replica's old token).
    good = token(jobs.core, jobs.ns, mine)
    assert post(url, good, body, ca)[0] == 200
    jobs.core.delete_namespaced_pod("mine-worker-0", jobs.ns, grace_period_seconds=0)
    wait_until(lambda: "mine-worker-0" not in {n for n, p in jobs.pods("mine").items() if p.metadata.uid == mine.metadata.uid},
               timeout=30, what="the pod gone")  # fmt: skip
    code, answer = post(url, good, body, ca)
    assert code == 403, answer
    assert (jobs.get(GJ, "theirs").get("status") or {}).get("progress") is None  # nothing reached the other job
