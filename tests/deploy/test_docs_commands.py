"""The install documents' commands, run as written (README.md and docs/install.md, issue 46).

Each ```bash block marked ``<!-- docs-test: run -->`` (tests/support/docs_blocks.py) runs in
``bash -euo pipefail`` from the repository's root, with `helm`, `kubectl` and `airflow` on the
PATH: the local cluster's, and Airflow's on a migrated SQLite database of its own. The local
cluster has no registry and no Docker, so a few strings of the documents stand for something
else here. They are all in SUBSTITUTIONS below, and nowhere else: a command the documents change
without its substitution runs as written and fails.

The README's install, then its DAG: run by `airflow dags test` with the connection the install
made, as the Airflow workers' identity (the official chart's `airflow/airflow-worker`), whose only
rights in team-a are the chart's Roles; its job runs under the deployed controller to success.
docs/install.md: its install, upgrade, metrics and uninstall blocks, in that order.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.airflow import AIRFLOW, migrated_database
from tests.support.chart import helm
from tests.support.cluster import LocalCluster, delete_namespace, has_default_sa, wait_until
from tests.support.deploy import NAMESPACE, RELEASE, Release
from tests.support.docs_blocks import ROOT, Block, to_run
from tests.support.rbac import account_kubeconfig

if TYPE_CHECKING:
    from collections.abc import Iterator

TEAM = "team-a"  # the documents' namespace for jobs
AIRFLOW_NS, WORKER = "airflow", "airflow-worker"  # the official Airflow chart's, as the documents assume
DOC_IMAGE = "registry.example.com/airflow-t9k/controller"
JOB_KIND = "pytorchtrainingjobs"
CHART, LOCAL = "airflow-t9k deploy/chart/airflow-t9k", "--values deploy/chart/values-local.yaml"


def substitutions(image: str, worker_kubeconfig: Path) -> list[tuple[str, str]]:
    """What stands for what on the local cluster, in the order applied (plain string replacement).

    ``image`` is the controller's image as built without Docker and imported into the real node's
    containerd (`scripts/local-cluster.sh image import controller`); ``worker_kubeconfig`` is the
    `airflow-worker` ServiceAccount's token: Airflow runs outside the cluster here."""
    repo, _, tag = image.rpartition(":")
    return [
        (f"docker build -f deploy/Containerfile -t {DOC_IMAGE}:0.1.0 .", "scripts/local-cluster.sh image import controller"),
        (f"docker push {DOC_IMAGE}:0.1.0", "true  # no registry: imported into the real node above"),
        (DOC_IMAGE, repo),
        ("image.tag=0.1.0", f"image.tag={tag}"),
        ("image.tag=NEW", f"image.tag={tag}"),
        # The pods on the real node (the kwok nodes run no process) and never pulled; the CRDs
        # other tests applied with `airflow-t9k crds` adopted (a fresh cluster has none).
        (f"helm install {CHART}", f"helm install {CHART} {LOCAL} --take-ownership --force-conflicts"),
        (f"helm upgrade {CHART}", f"helm upgrade {CHART} {LOCAL} --force-conflicts"),
        ('"in_cluster": true', f'"kube_config_path": "{worker_kubeconfig}"'),
    ]  # fmt: skip


def substituted(block: Block, pairs: list[tuple[str, str]]) -> str:
    text = block.text
    for old, new in pairs:
        text = text.replace(old, new)
    return text


class Shell:
    """Runs the documents' blocks: bash from the repository's root, `helm`, `kubectl` and
    `airflow` first on the PATH, the local cluster's kubeconfig, Airflow's own home."""

    def __init__(self, cluster: LocalCluster, home: Path, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs
        tools = home / "bin"
        tools.mkdir(parents=True, exist_ok=True)
        kubectl = next(
            Path(os.environ.get("T9K_CLUSTER_CACHE", Path.home() / ".cache" / "airflow-t9k")).glob("k8s-*/bin/kubectl")
        )
        for name, target in (("helm", helm()), ("kubectl", str(kubectl)), ("airflow", AIRFLOW)):
            (tools / name).unlink(missing_ok=True)
            (tools / name).symlink_to(target)
        migrated_database(home / "airflow.db")
        (home / "dags").mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        self.env = {**env, "PATH": f"{tools}:{env['PATH']}", "KUBECONFIG": str(cluster.kubeconfig),
                    "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
                    "AIRFLOW__DATABASE__CHECK_MIGRATIONS": "False", "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags")}  # fmt: skip

    def run(self, block: Block) -> str:
        text = substituted(block, self.pairs)
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=ROOT, env=self.env, capture_output=True, text=True,
                             timeout=900, check=False)  # fmt: skip
        assert out.returncode == 0, (
            f"{block.where} failed (exit {out.returncode}) as run:\n{text}\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
        )
        return out.stdout


def python_block(document: Path, section: str) -> str:
    from tests.support.docs_blocks import blocks

    (block,) = [b for b in blocks(document) if b.section == section and b.language == "python"]
    return block.text


@pytest.fixture
def fresh(shared_release: Release, core: client.CoreV1Api) -> Iterator[Release]:
    """No release, no team-a; the Airflow chart's worker ServiceAccount. The shared release is put
    back by the next test that needs it (its state is forgotten here)."""
    shared_release.remove()
    delete_namespace(core, TEAM)
    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=AIRFLOW_NS)))
    except ApiException as exc:
        if exc.status != 409:
            raise
    wait_until(lambda: has_default_sa(core, AIRFLOW_NS), timeout=30, what=f"serviceaccount default in {AIRFLOW_NS}")
    try:
        core.create_namespaced_service_account(AIRFLOW_NS, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=WORKER)))
    except ApiException as exc:
        if exc.status != 409:
            raise
    try:
        yield shared_release
    finally:
        shared_release.remove()
        delete_namespace(core, TEAM)


def test_readme_install_then_its_dag(cluster: LocalCluster, core, api_client, controller_image: str, fresh: Release,
                                     tmp_path: Path) -> None:  # fmt: skip
    worker = account_kubeconfig(core, cluster.kubeconfig, AIRFLOW_NS, WORKER, tmp_path / "worker.kubeconfig")
    shell = Shell(cluster, tmp_path / "airflow", substitutions(controller_image, worker))
    readme = ROOT / "README.md"
    (install,) = to_run(readme)
    shell.run(install)
    assert len(fresh.wait_ready()) == 2  # `--wait` returned: the two replicas are Ready
    labels = core.read_namespace(TEAM).metadata.labels
    assert labels.get("airflow-t9k.io/jobs") == "enabled"

    # The DAG author's part: the README's DAG, as written, through the connection the install added.
    dag = tmp_path / "airflow" / "dags" / "train.py"
    dag.write_text(python_block(readme, "For the DAG author: a training job in a DAG"))
    run = subprocess.Popen([AIRFLOW, "dags", "test", "train", "-f", str(dag)], env=shell.env, cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        api = client.CustomObjectsApi(api_client)

        def running_pods() -> list[client.V1Pod] | None:
            jobs = api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", TEAM, JOB_KIND)["items"]
            if len(jobs) != 1 or (jobs[0].get("status") or {}).get("phase") != "Running":
                return None
            pods = core.list_namespaced_pod(
                TEAM, label_selector=f"batch.tensorstack.dev/job-name={jobs[0]['metadata']['name']}"
            ).items
            return pods if len(pods) == 4 and all(p.status.phase == "Running" for p in pods) else None

        pods = wait_until(running_pods, timeout=180, interval=1, what=f"the README DAG's job Running in {TEAM} with 4 pods")
        # kwok runs no process: the replicas end, successfully, a second after this.
        for pod in pods:
            core.patch_namespaced_pod(pod.metadata.name, TEAM, {"metadata": {"annotations": {"sim.t9k.test/duration": "1s"}}})
        output, _ = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, f"airflow dags test train ended {run.returncode}:\n{output[-6000:]}"
    (job,) = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", TEAM, JOB_KIND
    )["items"]
    assert job["status"]["phase"] == "Succeeded"
    assert fresh.refusals() == set(), "the deployed controller was refused a right"


# docs/install.md's blocks run, in the order an operator would (the document has Metrics after Uninstall).
INSTALL_ORDER = ("In a cluster", "Upgrade", "Metrics", "Uninstall")


def test_install_md_install_upgrade_metrics_uninstall(cluster: LocalCluster, core, api_client, controller_image: str,
                                                      fresh: Release, tmp_path: Path) -> None:  # fmt: skip
    worker = account_kubeconfig(core, cluster.kubeconfig, AIRFLOW_NS, WORKER, tmp_path / "worker.kubeconfig")
    shell = Shell(cluster, tmp_path / "airflow", substitutions(controller_image, worker))
    by_section = {b.section: b for b in to_run(ROOT / "docs" / "install.md")}
    assert sorted(by_section) == sorted(INSTALL_ORDER), "a block marked run in docs/install.md has no place in INSTALL_ORDER"
    rbac = client.RbacAuthorizationV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    ext = client.ApiextensionsV1Api(api_client)

    shell.run(by_section["In a cluster"])
    assert len(fresh.wait_ready()) == 2
    assert [b.metadata.name for b in rbac.list_namespaced_role_binding(TEAM).items], f"no RoleBinding for Airflow in {TEAM}"
    out = subprocess.run([AIRFLOW, "connections", "get", "t9k_team_a", "-o", "json"], env=shell.env, capture_output=True,
                         text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    (conn,) = json.loads(out.stdout[out.stdout.index("[") :])
    assert (conn["conn_type"], conn["extra_dejson"]["namespace"]) == ("kubernetes", TEAM), conn

    generation = apps.read_namespaced_deployment(f"{RELEASE}-controller", NAMESPACE).metadata.generation
    shell.run(by_section["Upgrade"])
    assert len(fresh.wait_ready()) == 2
    assert apps.read_namespaced_deployment(f"{RELEASE}-controller", NAMESPACE).metadata.generation >= generation

    # The Prometheus Operator's ServiceMonitor kind, which the Metrics block asks the chart for: a
    # stand-in CRD that takes any spec (the local cluster runs no Prometheus Operator).
    if not _has_crd(ext):
        ext.create_custom_resource_definition(SERVICE_MONITOR_CRD)
    wait_until(lambda: _has_crd(ext, established=True), timeout=30, what="the ServiceMonitor CRD established")
    try:
        shell.run(by_section["Metrics"])
        monitors = client.CustomObjectsApi(api_client).list_namespaced_custom_object("monitoring.coreos.com", "v1", NAMESPACE,
                                                                                    "servicemonitors")["items"]  # fmt: skip
        assert [m["metadata"]["labels"].get("release") for m in monitors] == ["prometheus"]
        binding = rbac.read_cluster_role_binding("prometheus-airflow-t9k-metrics")
        assert binding.role_ref.name == "airflow-t9k-metrics-reader"
        rbac.read_cluster_role("airflow-t9k-metrics-reader")  # the role the document names is the chart's

        shell.run(by_section["Uninstall"])
        wait_until(lambda: not fresh.installed(), timeout=60, what="the release gone")
        kept = {c.metadata.name for c in ext.list_custom_resource_definition().items}
        assert "pytorchtrainingjobs.batch.tensorstack.dev" in kept  # CRDs stay, as the Uninstall section says
    finally:
        if _exists(rbac):
            rbac.delete_cluster_role_binding("prometheus-airflow-t9k-metrics")
        if _has_crd(ext):
            ext.delete_custom_resource_definition(SERVICE_MONITOR_CRD["metadata"]["name"])


SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {"kind": "ServiceMonitor", "plural": "servicemonitors", "singular": "servicemonitor"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}  # fmt: skip


def _has_crd(ext: client.ApiextensionsV1Api, established: bool = False) -> bool:
    try:
        crd = ext.read_custom_resource_definition(SERVICE_MONITOR_CRD["metadata"]["name"])
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return not established or any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def _exists(rbac: client.RbacAuthorizationV1Api) -> bool:
    try:
        rbac.read_cluster_role_binding("prometheus-airflow-t9k-metrics")
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
