"""The runtime: restarts without duplicates, and exactly the RBAC the deploy manifests grant."""

from __future__ import annotations

import http.server
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from kubernetes import client, utils

from tests.integration.conftest import LOG_DIR
from tests.support.cluster import wait_until
from tests.support.controller import ControllerProcess
from tests.support.kubelet import set_pod_terminated
from tests.support.rbac import delete_cluster_scoped
from tests.support.templates import Templates, template

ROOT = Path(__file__).resolve().parents[2]


def generic(name, replicas, restart=None, annotations=None):
    spec = {"type": "worker", "replicas": replicas,
            "template": {"metadata": {"annotations": annotations or {}},
                         "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}  # fmt: skip
    if restart:
        spec["restartPolicy"] = restart
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [spec], "service": {"ports": [{"name": "p", "port": 80}]}}}  # fmt: skip


def test_killed_mid_creation_and_restarted_converges_without_duplicates(jobs, controller_factory):
    first = controller_factory()
    jobs.create(generic("big", 30))
    wait_until(lambda: len(jobs.pods("big")) >= 3, timeout=30, what="creation under way")
    first.kill()
    time.sleep(0.5)  # let a create that was in flight at the kill land first
    partial = {n: p.metadata.uid for n, p in jobs.pods("big").items()}
    second = controller_factory()
    jobs.wait_phase("GenericJob", "big", "Running", timeout=60)
    pods = jobs.pods("big")
    assert sorted(pods) == sorted(f"big-worker-{i}" for i in range(30))
    assert all(pods[n].metadata.uid == uid for n, uid in partial.items())  # nothing recreated
    services = [s for s in jobs.core.list_namespaced_service(jobs.ns).items if s.metadata.name.startswith("big-")]
    assert len(services) == 30
    m = second.metrics()
    assert m.get("create.Pod", 0) == 30 - len(partial)  # only the missing ones were created


def test_work_done_while_the_controller_was_down_is_picked_up(jobs, controller_factory):
    first = controller_factory()
    jobs.create(generic("gj", 3, restart={"policy": "OnFailure", "limit": 3}))
    jobs.wait_phase("GenericJob", "gj", "Running")
    before = {n: p.metadata.uid for n, p in jobs.pods("gj").items()}
    first.kill()
    set_pod_terminated(jobs.core, jobs.ns, "gj-worker-1", phase="Failed", exit_code=143)
    jobs.create(generic("late", 2))
    second = controller_factory()
    wait_until(lambda: (jobs.live_pods("gj").get("gj-worker-1")
                        or client.V1Pod(metadata=client.V1ObjectMeta(uid=before["gj-worker-1"]))).metadata.uid
               != before["gj-worker-1"], timeout=30, what="restart of worker-1")  # fmt: skip
    jobs.wait_phase("GenericJob", "late", "Running")
    after = jobs.live_pods("gj")
    assert sorted(after) == ["gj-worker-0", "gj-worker-1", "gj-worker-2"]
    assert after["gj-worker-0"].metadata.uid == before["gj-worker-0"]
    assert after["gj-worker-1"].metadata.annotations["batch.tensorstack.dev/restart-count"] == "1"
    # Let the second controller record the final state (all three running) before it stops.
    wait_until(lambda: jobs.get("GenericJob", "gj")["status"]["aggregate"]["running"] == 3, what="gj settled")
    second.stop()
    third = controller_factory()  # a clean restart changes nothing
    wait_until(lambda: third.metrics().get("reconcile", 0) >= 2, what="third controller reconciled")
    assert third.metrics().get("create.Pod", 0) == 0
    assert third.metrics().get("status_write", 0) == 0


@contextmanager
def crd_owned_by(api_client, name: str, owner: str) -> Iterator[None]:
    """Relabel one of our CRDs as another controller's for the test, then give it back."""
    ext = client.ApiextensionsV1Api(api_client)
    labels = ("app.kubernetes.io/managed-by", "app.kubernetes.io/part-of")
    ext.patch_custom_resource_definition(name, {"metadata": {"labels": dict.fromkeys(labels, owner)}})
    try:
        yield
    finally:
        ext.patch_custom_resource_definition(name, {"metadata": {"labels": dict.fromkeys(labels, "airflow-t9k")}})


# Serial: while the CRD says another controller owns it, every controller started beside it
# (other tests') would refuse to start too.
@pytest.mark.serial
def test_controller_refuses_to_fight_the_t9k_platform(api_client, jobs, controller_factory):
    with crd_owned_by(api_client, "genericjobs.batch.tensorstack.dev", "t9k-platform"):
        proc = controller_factory(wait=False)
        assert proc.wait_exit(30) == 3
        assert "not installed by airflow-t9k" in proc.tail()
        forced = controller_factory("--force")
        assert forced.proc.poll() is None


@pytest.mark.serial  # the same, for the AscendJob CRD
def test_kind_flag_leaves_ascendjobs_to_mindcluster(api_client, jobs, controller_factory):
    name = "ascendjobs.mindxdl.gitee.com"
    with crd_owned_by(api_client, name, "mindcluster"):
        refused = controller_factory(wait=False)
        assert refused.wait_exit(30) == 3
        assert f"CRD {name} was not installed by airflow-t9k" in refused.tail()
        only_generic = controller_factory("--kind", "GenericJob")
        acjob = {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob",
                 "metadata": {"name": "ac", "labels": {"framework": "pytorch"}},
                 "spec": {"replicaSpecs": {"Master": {"template": {"spec": {"containers": [{"name": "ascend",
                                                                                            "image": "i"}]}}}}}}  # fmt: skip
        jobs.create(acjob)
        jobs.create(generic("gj", 1))
        jobs.wait_phase("GenericJob", "gj", "Running")
        assert "reconciling GenericJob in" in only_generic.tail()
        assert jobs.get("AscendJob", "ac").get("status") is None
        assert jobs.pods("ac") == {}


def _rbac_kubeconfig(api_client, cluster, namespace, manifest: str, tmp_path) -> tuple[Path, list]:
    """Apply a deploy manifest under unique names, and a kubeconfig holding its ServiceAccount's real token."""
    suffix = uuid.uuid4().hex[:6]
    text = (ROOT / "deploy" / manifest).read_text()
    text = text.replace("airflow-t9k-controller", f"airflow-t9k-controller-{suffix}")
    text = text.replace("airflow-t9k-system", namespace).replace("namespace: ml-jobs", f"namespace: {namespace}")
    docs = [d for d in yaml.safe_load_all(text) if d]
    core = client.CoreV1Api(api_client)
    sa = f"airflow-t9k-controller-{suffix}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    utils.create_from_yaml(api_client, yaml_objects=docs)
    token = core.create_namespaced_service_account_token(sa, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    base = yaml.safe_load(cluster.kubeconfig.read_text())
    base["users"] = [{"name": "sa", "user": {"token": token}}]
    base["contexts"][0]["context"]["user"] = "sa"
    path = tmp_path / f"kubeconfig-{suffix}"
    path.write_text(yaml.safe_dump(base))
    return path, docs


def _run_jobs_to_success(jobs):
    jobs.create(generic("rbac", 2, annotations={"sim.t9k.test/duration": "1s"}))
    # An MPIJob too: its SSH Secret is created with Secrets create-only (no get/list/watch).
    mpi = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "MPIJob", "metadata": {"name": "rbac-mpi"},
           "spec": {"worker": {"replicas": 1, "cmd": ["./run"], "template": {
               "metadata": {"annotations": {"sim.t9k.test/duration": "1s"}},
               "spec": {"containers": [{"name": "mpi-worker", "image": "mpi:1"}]}}}}}  # fmt: skip
    jobs.create(mpi)
    # A job naming a job template: the merged spec is written with `update` on the job (docs/templates.md).
    pod = {
        "metadata": {"annotations": {"sim.t9k.test/duration": "1s"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    Templates(jobs.api.api_client, jobs.ns).create(template("rbac-template", "GenericJob", pod))
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "rbac-templated"},
                 "spec": {"templateRef": {"name": "rbac-template"},
                          "replicaSpecs": [{"type": "worker", "replicas": 1}]}})  # fmt: skip
    jobs.wait_phase("GenericJob", "rbac", "Succeeded")
    jobs.wait_phase("GenericJob", "rbac-templated", "Succeeded")
    jobs.reasons("rbac", "Succeeded")
    done = jobs.wait_phase("MPIJob", "rbac-mpi", "Succeeded")
    assert done["status"]["sshSecret"]["name"] == "rbac-mpi-ssh"


def test_controller_works_with_exactly_the_cluster_rbac(api_client, cluster, namespace, jobs, controller_factory, tmp_path):
    kubeconfig, docs = _rbac_kubeconfig(api_client, cluster, namespace, "rbac-cluster.yaml", tmp_path)
    try:
        controller_factory(kubeconfig=kubeconfig)
        _run_jobs_to_success(jobs)
    finally:
        delete_cluster_scoped(api_client, docs)


def test_controller_works_with_exactly_the_namespace_rbac(api_client, cluster, namespace, jobs, controller_factory, tmp_path):
    kubeconfig, docs = _rbac_kubeconfig(api_client, cluster, namespace, "rbac-namespace.yaml", tmp_path)
    try:
        # Watching every namespace is not allowed with the namespaced Role: it must not become healthy.
        everywhere = controller_factory(kubeconfig=kubeconfig, ns=None, wait=False)
        with pytest.raises(AssertionError, match="not healthy"):
            everywhere.wait_healthy(timeout=5)
        assert "forbidden" in everywhere.tail(200).lower()
        everywhere.stop()
        controller_factory(kubeconfig=kubeconfig)
        _run_jobs_to_success(jobs)
    finally:
        delete_cluster_scoped(api_client, docs)


def test_held_replica_detail_lands_without_another_event(jobs, controller):
    """Replica-only status changes wait --coalesce-status (1 s) to be written together; the
    write is then due on its own: here nothing else happens once three pods have ended."""
    job = generic("held", 3, annotations={"sim.t9k.test/duration": "3s"})
    long = {**job["spec"]["replicaSpecs"][0], "type": "long", "replicas": 1,
            "template": {"metadata": {"annotations": {}},
                         "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}  # fmt: skip
    job["spec"]["replicaSpecs"].append(long)
    jobs.create(job)
    jobs.wait_phase("GenericJob", "held", "Running")
    wait_until(lambda: jobs.get("GenericJob", "held")["status"]["aggregate"]["succeeded"] == 3, timeout=60,
               what="three ended replicas in status")  # fmt: skip
    status = jobs.get("GenericJob", "held")["status"]
    assert status["phase"] == "Running"
    assert status["aggregate"]["running"] == 1
    assert controller.metrics().get("status_held", 0) >= 1


def test_the_field_manager_keeps_status_as_one_field_and_every_write_still_lands(jobs, controller):
    """Status is atomic in the CRDs (controller/crds.py STATUS): the controller's managedFields
    entry is ``f:status`` alone, not a key per child uid; its merge patches (the uids recorded
    after the creates) still add to what its PUTs wrote."""
    jobs.create(generic("atomic", 3))
    jobs.wait_phase("GenericJob", "atomic", "Running")

    def recorded() -> dict | None:
        job = jobs.get("GenericJob", "atomic")
        record = job["status"].get("created") or {}
        entries = [e for kind in ("Pod", "Service") for e in (record.get(kind) or {}).values()]
        return job if len(entries) == 6 and all("uid" in e for e in entries) else None

    job = wait_until(recorded, timeout=30, what="every child's uid on record")
    created = job["status"]["created"]
    assert sorted(created["Pod"]) == sorted(created["Service"]) == [f"atomic-worker-{i}" for i in range(3)]
    assert {n: e["uid"] for n, e in created["Pod"].items()} == {n: p.metadata.uid for n, p in jobs.pods("atomic").items()}
    status_entries = [m for m in job["metadata"]["managedFields"] if m.get("subresource") == "status"]
    assert status_entries, job["metadata"]["managedFields"]
    assert all(m["fieldsV1"] == {"f:status": {}} for m in status_entries), status_entries


def test_a_controller_whose_port_another_process_holds_is_not_mistaken_for_it(cluster, namespace, crds):
    """``free_port`` picks a port that another process may take before the controller binds it.
    Here a stranger holds it and answers 200 to every probe: the test's controller must not be
    taken as healthy on the stranger's word; it is started again on another port and is healthy
    there, itself."""

    class Always200(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    stranger = http.server.HTTPServer(("127.0.0.1", 0), Always200)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    proc = ControllerProcess(cluster.kubeconfig, namespace, LOG_DIR)
    taken = proc.port = stranger.server_address[1]
    try:
        proc.start()
        assert proc.ports_lost == 1
        assert proc.port != taken
        assert proc.proc is not None
        assert proc.proc.poll() is None
        assert proc.probe("/readyz") == 200
        assert f"listening on 127.0.0.1:{proc.port}" in proc.tail(200)
    finally:
        proc.stop()
        stranger.shutdown()
