"""Two controllers, one Lease: the standby takes over when the leader dies or is cut off,
no pod is ever created twice, and a leader that lost its lease does not act after waking.

Each test uses its own Lease in its own namespace, with the default timings (lease 10 s,
renew deadline 7 s, retry 1.5 s), so the failover figure printed is the one users get.
"""

from __future__ import annotations

import os
import signal
import time

from kubernetes import client

from tests.support.cluster import wait_until
from tests.support.ha import PodCreations, generic, leader_flags, leads
from tests.support.kubelet import set_pod_terminated

LEASE = "t9k-ha"


def two_controllers(controller_factory, namespace):
    a = controller_factory(*leader_flags(namespace, LEASE))
    b = controller_factory(*leader_flags(namespace, LEASE))
    leader = wait_until(lambda: next((c for c in (a, b) if leads(c, LEASE)), None), timeout=30, what="a leader")
    return leader, (b if leader is a else a)


def writes(ctrl) -> float:
    """Successful writes other than the lease's own renewals."""
    return sum(
        v for k, v in ctrl.metrics().items() if k.startswith("airflow_t9k_api_writes_total{") and 'resource="leases"' not in k
    )


def write_requests(ctrl) -> float:
    """Write requests sent, whatever the answer (a 409 AlreadyExists is still an attempt to act),
    less the lease renewals that succeeded (one may land between reading this and SIGSTOP)."""
    m = ctrl.metrics()
    sent = sum(v for k, v in m.items() if k.startswith("rest_client_requests_total{")
               and any(f'method="{verb}"' in k for verb in ("POST", "PUT", "PATCH", "DELETE")))  # fmt: skip
    return sent - sum(v for k, v in m.items() if k.startswith("airflow_t9k_api_writes_total{") and 'resource="leases"' in k)


def holder(api_client, namespace) -> str:
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(LEASE, namespace)
    return lease.spec.holder_identity or ""


def identity(ctrl) -> str:
    line = next(ln for ln in ctrl.tail(400).splitlines() if "leader election on:" in ln)
    return line.rsplit("identity ", 1)[1].strip()


def finish(jobs, name):
    for pod in jobs.pods(name):
        set_pod_terminated(jobs.core, jobs.ns, pod, phase="Succeeded", exit_code=0)


def test_leader_killed_under_load_standby_takes_over_without_duplicates(api_client, jobs, namespace, controller_factory, figures):
    pods = PodCreations(jobs.core, namespace)
    try:
        leader, standby = two_controllers(controller_factory, namespace)
        assert not leads(standby, LEASE)
        assert writes(standby) == 0
        for i in range(3):
            jobs.create(generic(f"pre{i}", 4))
        for i in range(3):
            jobs.wait_phase("GenericJob", f"pre{i}", "Running", timeout=60)
        for i in range(4):  # creation still under way when the leader dies
            jobs.create(generic(f"mid{i}", 6))
        wait_until(lambda: pods.created() > 12, timeout=20, what="the next jobs' pods being created")
        leader.kill()
        killed = time.monotonic()
        finish(jobs, "pre0")  # a transition only the new leader can record
        wait_until(lambda: leads(standby, LEASE), timeout=40, what="the standby taking over")
        elected = time.monotonic() - killed
        jobs.wait_phase("GenericJob", "pre0", "Succeeded", timeout=40)
        transition = time.monotonic() - killed
        for i in range(4):
            jobs.wait_phase("GenericJob", f"mid{i}", "Running", timeout=60)
        pods.caught_up()
        figures(f"failover after SIGKILL: standby elected in {elected:.1f}s, next transition written after "
              f"{transition:.1f}s; pods created {pods.created()}, duplicates {len(pods.duplicates())}")  # fmt: skip
        assert transition <= 30, transition
        assert pods.duplicates() == {}
        assert pods.created() == 3 * 4 + 4 * 6  # each pod exactly once across both leaders
        assert sorted(jobs.pods("mid3")) == sorted(f"mid3-worker-{i}" for i in range(6))
    finally:
        pods.stop()


def test_paused_leader_does_not_act_after_its_lease_passed(api_client, jobs, namespace, controller_factory, figures):
    """SIGSTOP the leader past the lease duration (as a partition or a long GC pause would):
    the standby takes over, and the old leader, woken, writes nothing and stands by."""
    pods = PodCreations(jobs.core, namespace)
    old = None
    try:
        old, new = two_controllers(controller_factory, namespace)
        jobs.create(generic("before", 3))
        jobs.wait_phase("GenericJob", "before", "Running", timeout=60)
        wait_until(lambda: (jobs.get("GenericJob", "before").get("status") or {}).get("aggregate", {}).get("running") == 3,
                   what="before settled")  # fmt: skip
        time.sleep(1)  # let trailing writes land before taking the count
        before = write_requests(old)
        os.kill(old.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        # Work that arrives while the old leader is frozen: its watch delivers all of it on waking.
        jobs.create(generic("during", 5))
        finish(jobs, "before")
        wait_until(lambda: leads(new, LEASE), timeout=40, what="the standby taking over")
        took_over = time.monotonic() - stopped
        jobs.wait_phase("GenericJob", "before", "Succeeded", timeout=30)
        jobs.wait_phase("GenericJob", "during", "Running", timeout=30)
        time.sleep(max(0.0, 14 - (time.monotonic() - stopped)))  # well past the 10 s lease duration
        os.kill(old.pid, signal.SIGCONT)
        wait_until(lambda: "lost leadership" in old.tail(400), timeout=10, what="the old leader noticing")
        time.sleep(5)  # time enough to act on everything its watch just delivered, if it were to
        pods.caught_up()
        m = old.metrics()
        figures(f"paused leader: standby took over after {took_over:.1f}s; after waking the old leader wrote "
              f"{write_requests(old) - before:.0f} times, {m.get('airflow_t9k_leader_fenced_writes_total', 0):.0f} writes "
              f"refused by its fence; pods created {pods.created()}")  # fmt: skip
        assert write_requests(old) == before  # not one write request after waking, not even to its lease
        assert not leads(old, LEASE)
        assert leads(new, LEASE)
        assert holder(api_client, namespace) == identity(new) != identity(old)
        assert old.proc.poll() is None
        assert old.probe("/readyz") == 200
        assert pods.duplicates() == {}
        assert pods.created() == 3 + 5
        assert jobs.phase("GenericJob", "before") == "Succeeded"
    finally:
        if old is not None and old.proc is not None and old.proc.poll() is None:
            os.kill(old.pid, signal.SIGCONT)  # never leave a stopped process behind
        pods.stop()


def test_clean_shutdown_hands_over_at_once(api_client, jobs, namespace, controller_factory, figures):
    """SIGTERM (a rolling update, a drained node): the leader releases its Lease on the way
    out, so the standby does not wait out the lease duration."""
    leader, standby = two_controllers(controller_factory, namespace)
    leader.stop()
    stopped = time.monotonic()
    assert leader.proc.returncode == 0
    assert "released" in leader.tail(20)
    wait_until(lambda: leads(standby, LEASE), timeout=15, what="the standby taking over")
    took = time.monotonic() - stopped
    figures(f"handover after SIGTERM: {took:.1f}s")
    assert took < 5  # a retry period or two, not the 10 s lease duration
    jobs.create(generic("after", 2))
    jobs.wait_phase("GenericJob", "after", "Running", timeout=60)


def test_lease_rbac_of_the_deploy_manifests_is_enough(api_client, cluster, namespace, jobs, controller_factory, tmp_path):
    """The controller under exactly rbac-cluster.yaml's grants elects itself and works."""
    from tests.integration.test_controller_runtime import _rbac_kubeconfig
    from tests.support.rbac import delete_cluster_scoped

    kubeconfig, docs = _rbac_kubeconfig(api_client, cluster, namespace, "rbac-cluster.yaml", tmp_path)
    lease = next(d for d in docs if d["kind"] == "Role")["rules"][1]["resourceNames"][0]  # renamed for this test
    try:
        ctrl = controller_factory(*leader_flags(namespace, lease), kubeconfig=kubeconfig)
        wait_until(lambda: leads(ctrl, lease), timeout=30, what="leadership under the manifests' RBAC")
        jobs.create(generic("rbac", 1))
        jobs.wait_phase("GenericJob", "rbac", "Running", timeout=60)
        assert "forbidden" not in ctrl.tail(200).lower()
    finally:
        delete_cluster_scoped(api_client, docs)
