"""What a platform team does to an installed controller while users' jobs run: lose the leader
(`kubectl delete pod`), `helm upgrade` to a rebuilt image (from an earlier chart, so its CRDs
change too), `helm uninstall` and install again. Each with 20 (or 10) jobs running on kwok: no
pod is created twice, no replica restarted, every job ends as it would have. The figures printed
here are the ones docs/install.md gives.

The replicas run until the test ends them (as their kubelet would report them ended), after
the disruption: a simulated duration long enough for it on a loaded machine was mostly waited out."""

from __future__ import annotations

import time

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import wait_until
from tests.support.deploy import CONTROLLER, NAMESPACE, RELEASE, old_chart, rebuilt_image
from tests.support.ha import PodCreations
from tests.support.kubelet import set_pod_terminated

GK = "GenericJob"


def _job(name: str) -> dict:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GK, "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "Never"},
                                       "template": {"spec": {"containers": [{"name": "main", "image": "bb"}]}}}]}}  # fmt: skip


def _start(jobs, count: int, failing: int = 0) -> dict[str, str]:
    """``count`` jobs, the last ``failing`` of them to fail; their expected end; once all run."""
    expected = {}
    for i in range(count):
        jobs.create(_job(f"j{i:02d}"))
        expected[f"j{i:02d}"] = "Failed" if i >= count - failing else "Succeeded"
    wait_until(lambda: all(jobs.phase(GK, n) == "Running" for n in expected), timeout=90, what=f"{count} jobs Running")
    return expected


def _finish(jobs, expected: dict[str, str]) -> None:
    """End every replica as its kubelet would: worker-1 of a job expected to fail exits 3 (first,
    so the job fails on it), every other replica exits 0. A replica the controller already
    removed (the rest of a failed job) is skipped."""
    pods = [(n, p) for n in expected for p in jobs.pods(n)]
    failing = [p for n, p in pods if expected[n] == "Failed" and p.endswith("-worker-1")]
    for pod in failing + sorted({p for _, p in pods} - set(failing)):
        try:
            set_pod_terminated(jobs.core, jobs.ns, pod, phase="Failed" if pod in failing else "Succeeded",
                               exit_code=3 if pod in failing else 0)  # fmt: skip
        except ApiException as exc:
            if exc.status != 404:
                raise


def _ended(jobs, expected: dict[str, str], timeout: float = 180) -> dict[str, str]:
    wait_until(lambda: all(jobs.phase(GK, n) in ("Succeeded", "Failed") for n in expected), timeout=timeout,
               what="every job ended")  # fmt: skip
    return {n: jobs.phase(GK, n) for n in expected}


def _restarts(jobs, expected: dict[str, str]) -> int:
    return sum(r.get("restartCount", 0) for n in expected for t in jobs.get(GK, n)["status"].get("tasks") or []
               for r in t.get("status") or [])  # fmt: skip


def test_the_standby_leads_within_15_s_of_the_leaders_deletion_with_20_jobs_running(release, jobs):
    pods = {p.metadata.name for p in release.wait_ready()}
    creations = PodCreations(jobs.core, jobs.ns)
    try:
        expected = _start(jobs, 20, failing=4)
        leader = wait_until(release.leader, timeout=30, what="a leader")
        (standby,) = pods - {leader}
        t0 = time.monotonic()
        release.core.delete_namespaced_pod(leader, NAMESPACE)  # as `kubectl delete pod`: graceful
        new = wait_until(lambda: release.leader() not in ("", leader) and release.leader(), timeout=30,
                         interval=0.1, what="another leader")  # fmt: skip
        took = time.monotonic() - t0
        # The released Lease goes to the first candidate that asks: the standby (every 1.5 s) or,
        # as often, the Deployment's replacement once its caches have synced. Either is warm.
        which = "the standby" if new == standby else "the replacement pod"
        print(f"\nfailover: {which} {new} leads {took:.1f} s after `kubectl delete pod {leader}` (20 jobs running)")
        assert new in {p.metadata.name for p in release.pods()}
        assert took < 15
        _finish(jobs, expected)
        assert _ended(jobs, expected) == expected
        creations.caught_up()
        assert creations.duplicates() == {}, "a pod was created twice"
        assert creations.created() == 40
        assert _restarts(jobs, expected) == 0
        print("failover: 40 pods created once each, 0 restarts, 16 Succeeded and 4 Failed as designed")
    finally:
        creations.stop()
    release.wait_ready()  # the Deployment's replacement is Ready beside the new leader


def test_helm_upgrade_to_a_rebuilt_image_with_20_jobs_running_upgrades_the_crds_and_touches_no_replica(
    release, jobs, api_client, tmp_path
):
    ext = client.ApiextensionsV1Api(api_client)

    def columns() -> list[str]:
        crd = ext.read_custom_resource_definition("genericjobs.batch.tensorstack.dev")
        return [c.name for c in crd.spec.versions[0].additional_printer_columns]

    try:
        release.upgrade(chart=old_chart(tmp_path))  # the release as an earlier version of the chart left it
        assert "ETA" not in columns()
        rebuilt = rebuilt_image(release.image, "rebuilt")
        before = {p.metadata.name for p in release.wait_ready()}
        creations = PodCreations(jobs.core, jobs.ns)
        try:
            expected = _start(jobs, 20)
            replicas = {p.metadata.name: p.metadata.uid for n in expected for p in jobs.pods(n).values()}
            took = release.upgrade(image=rebuilt)
            print(f"\nupgrade: `helm upgrade --wait` to {rebuilt} took {took:.1f} s with 20 jobs running")
            after = release.wait_ready()
            assert {p.metadata.name for p in after}.isdisjoint(before)  # both replicas replaced
            assert {p.status.container_statuses[0].image for p in after} == {rebuilt}
            assert "ETA" in columns()  # the CRDs upgraded with the release
            crd = ext.read_custom_resource_definition("genericjobs.batch.tensorstack.dev")
            assert crd.metadata.labels["helm.sh/chart"] == "airflow-t9k-0.1.0"
            still = {p.metadata.name: p.metadata.uid for n in expected for p in jobs.pods(n).values()}
            assert still == replicas  # no replica recreated by the upgrade
            _finish(jobs, expected)
            assert _ended(jobs, expected) == expected  # no job lost
            creations.caught_up()
            assert creations.duplicates() == {}, "a pod was created twice (a job re-run)"
            assert creations.created() == 40
            assert _restarts(jobs, expected) == 0
            print("upgrade: 0 replicas restarted or recreated, 0 jobs lost or re-run, CRDs upgraded")
        finally:
            creations.stop()
    except BaseException:
        release.upgrade()  # the defaults back, for whatever runs next
        raise
    # Passed: the release stays on the rebuilt image, the current chart. The next test that
    # wants the defaults gets them from its `release` fixture; the uninstall test below, which
    # only needs a release, uninstalls this one (a rollout of both pods less, about 19 s).


def test_helm_uninstall_keeps_jobs_and_crds_and_a_later_install_picks_the_jobs_up(release_as_left, jobs, api_client):
    release = release_as_left
    rbac = client.RbacAuthorizationV1Api(api_client)
    ext = client.ApiextensionsV1Api(api_client)
    creations = PodCreations(jobs.core, jobs.ns)
    try:
        expected = _start(jobs, 10, failing=2)
        took = release.uninstall()
        print(f"\nuninstall: `helm uninstall --wait` took {took:.1f} s with 10 jobs running")
        selector = f"app.kubernetes.io/instance={RELEASE}"
        assert release.pods() == []
        assert release.apps.list_namespaced_deployment(NAMESPACE, label_selector=selector).items == []
        assert release.core.list_namespaced_service_account(NAMESPACE, label_selector=selector).items == []
        assert rbac.list_cluster_role(label_selector=selector).items == []
        assert rbac.list_cluster_role_binding(label_selector=selector).items == []
        assert rbac.list_namespaced_role(NAMESPACE, label_selector=selector).items == []
        assert rbac.list_namespaced_role_binding(NAMESPACE, label_selector=selector).items == []
        crds = ext.list_custom_resource_definition(label_selector="app.kubernetes.io/part-of=airflow-t9k").items
        assert len(crds) == 11  # kept: with them every user's jobs
        assert sorted(jobs.get(GK, n)["metadata"]["name"] for n in expected) == sorted(expected)
        # Nobody reconciles meanwhile: the replicas end, the jobs still say Running.
        _finish(jobs, expected)
        wait_until(lambda: all(p.status.phase in ("Succeeded", "Failed") for n in expected for p in jobs.pods(n).values()),
                   timeout=60, what="every replica ended while no controller ran")  # fmt: skip
        assert {jobs.phase(GK, n) for n in expected} == {"Running"}
        t0 = time.monotonic()
        release.install(take_ownership=False)  # a plain `helm install`: it adopts the CRDs the uninstall kept
        ended = _ended(jobs, expected)
        print(f"uninstall: reinstalled; every job ended {time.monotonic() - t0:.1f} s after `helm install` began")
        assert ended == expected
        creations.caught_up()
        assert creations.duplicates() == {}
        assert creations.created() == 20  # picked up where they were: no replica run again
        assert _restarts(jobs, expected) == 0
    finally:
        creations.stop()
    assert release.apps.read_namespaced_deployment(CONTROLLER, NAMESPACE).status.ready_replicas == 2
