"""A job whose passes keep failing for a reason other than its spec says so, and recovers."""

from __future__ import annotations

from kubernetes import client

from tests.support.cluster import wait_until


def generic(name: str) -> dict:
    replica = {"type": "worker", "replicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [replica]}}  # fmt: skip


def test_pods_forbidden_by_a_quota_give_a_condition_and_one_event_then_the_job_runs(jobs, controller, core):
    quota = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="no-pods"), spec=client.V1ResourceQuotaSpec(hard={"pods": "0"})
    )
    core.create_namespaced_resource_quota(jobs.ns, quota)
    wait_until(lambda: (core.read_namespaced_resource_quota("no-pods", jobs.ns).status.hard or {}).get("pods") == "0",
               what="quota in force")  # fmt: skip
    jobs.create(generic("held"))
    wait_until(lambda: (jobs.condition("GenericJob", "held", "ReconcileError") or {}).get("status") == "True",
               timeout=60, what="ReconcileError condition")  # fmt: skip
    cond = jobs.condition("GenericJob", "held", "ReconcileError")
    assert cond["reason"] == "ReconcileFailing"
    assert "exceeded quota" in cond["message"]
    assert len(cond["message"]) <= 2048
    assert jobs.phase("GenericJob", "held") == "Pending"  # not Failed: the spec is fine
    wait_until(lambda: "ReconcileFailing" in [e.reason for e in jobs.events("held")], what="Warning Event")
    core.delete_namespaced_resource_quota("no-pods", jobs.ns)
    jobs.wait_phase("GenericJob", "held", "Running", timeout=90)
    wait_until(lambda: (jobs.condition("GenericJob", "held", "ReconcileError") or {}).get("status") == "False",
               timeout=30, what="condition cleared")  # fmt: skip
    assert [e.reason for e in jobs.events("held")].count("ReconcileFailing") == 1
    assert controller.proc.poll() is None
