"""Airflow's side in the cluster (docs/install.md, "Airflow's side in the cluster"): Airflow's
components as pods on the real node, from the image scripts/images/airflow.conf builds, each under
its own ServiceAccount, those accounts bound by nothing but the chart's `airflow.rbac.*` Roles, every
Kubernetes call made with `in_cluster=True` (no kubeconfig anywhere). The deployed controller runs
what they submit.

- On the worker (the scheduler's LocalExecutor): a job submitted and waited for; its real replica's
  result in XCom. The API server itself records who created each job (a MutatingAdmissionPolicy
  this test installs on its namespace stamps `request.userInfo.username`): the worker's account.
- Deferred: the same worker submits, the trigger waits in the triggerer's pod under its own account.
- Refused: the worker's identity may not create a job in a namespace the chart's Role leaves out.
- The UI's identity (read only) serves the T9k Jobs page and a task's T9k Job tab.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.real.support import REAL_NODE
from tests.support.airflow_pods import NAMESPACE, AirflowPods
from tests.support.airflow_probe import identity, probe
from tests.support.cluster import wait_until
from tests.support.deploy import NAMESPACE as CONTROLLER_NAMESPACE
from tests.support.deploy import RELEASE, script
from tests.support.jobs import Jobs

Obj = dict[str, Any]
GROUP, VERSION = "batch.tensorstack.dev", "v1beta1"
ADMISSION = ("admissionregistration.k8s.io", "v1")
CREATED_BY = "test.airflow-t9k.io/created-by"
WORKER, DEFERRED, REFUSED = "t9k_in_cluster_worker", "t9k_in_cluster_deferred", "t9k_in_cluster_refused"
ENDED = ("success", "failed")


@pytest.fixture(scope="module")
def airflow_images(controller_image: str) -> tuple[str, str]:
    """Airflow's image and the tests' PostgreSQL, built (cached by content) and imported into the
    real node (after `controller_image`, which checks that the node is there)."""
    return script("image", "import", "airflow"), script("image", "import", "postgres")


def _job(name: str) -> Obj:
    worker = {"type": "worker", "replicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [worker]}}  # fmt: skip


class CreatorStamp:
    """A MutatingAdmissionPolicy, bound to one namespace, that writes into every T9k job created
    there the user the API server authenticated for the request: an audit record no client can
    forge (whatever a client sends in that annotation is overwritten)."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.ns = namespace
        self.name = f"t9k-created-by-{namespace}"

    def install(self) -> None:
        stamp = f'Object{{metadata: Object.metadata{{annotations: {{"{CREATED_BY}": request.userInfo.username}}}}}}'
        rule = {"apiGroups": [GROUP], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["*"]}
        mutation = {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": stamp}}
        policy = {
            "apiVersion": "/".join(ADMISSION),
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": self.name},
            "spec": {"matchConstraints": {"resourceRules": [rule]}, "failurePolicy": "Fail", "reinvocationPolicy": "Never",
                     "mutations": [mutation]},
        }  # fmt: skip
        here = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}}}
        binding = {
            "apiVersion": "/".join(ADMISSION),
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": self.name},
            "spec": {"policyName": self.name, "matchResources": here},
        }
        self.api.create_cluster_custom_object(*ADMISSION, "mutatingadmissionpolicies", policy)
        self.api.create_cluster_custom_object(*ADMISSION, "mutatingadmissionpolicybindings", binding)
        # In force once the API server's policy informers have both: a dry run shows the stamp.
        wait_until(self._stamped, timeout=30, interval=0.5, what="the creator stamp in force")

    def _stamped(self) -> str | None:
        job = self.api.create_namespaced_custom_object(GROUP, VERSION, self.ns, "genericjobs", _job("dry-run"), dry_run="All")
        return (job["metadata"].get("annotations") or {}).get(CREATED_BY)

    def remove(self) -> None:
        for plural in ("mutatingadmissionpolicybindings", "mutatingadmissionpolicies"):
            try:
                self.api.delete_cluster_custom_object(*ADMISSION, plural, self.name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def _bindings_of_airflow(rbac: client.RbacAuthorizationV1Api) -> set[tuple[str, str, str]]:
    """Every RoleBinding and ClusterRoleBinding naming one of Airflow's ServiceAccounts (or their
    namespace's group): (namespace, binding, role)."""

    def airflows(subjects: list[Any] | None) -> bool:
        group = f"system:serviceaccounts:{NAMESPACE}"
        return any((s.kind == "ServiceAccount" and s.namespace == NAMESPACE) or (s.kind == "Group" and s.name == group)
                   for s in subjects or [])  # fmt: skip

    found = {(b.metadata.namespace, b.metadata.name, b.role_ref.name)
             for b in rbac.list_role_binding_for_all_namespaces().items if airflows(b.subjects)}  # fmt: skip
    found |= {("", b.metadata.name, b.role_ref.name) for b in rbac.list_cluster_role_binding().items if airflows(b.subjects)}
    return found


def _save_logs(pods: AirflowPods, core: client.CoreV1Api, where: Path) -> None:
    """Airflow's pods' logs and state, the real node's and the controller's (best effort: never
    hides the test's own failure)."""
    with contextlib.suppress(ApiException, OSError, AssertionError):
        pods.save_logs(where)
        node = core.read_node(REAL_NODE)
        lines = [f"node {REAL_NODE} allocatable={node.status.allocatable}"]
        lines += [f"  {c.type}={c.status} {c.reason}: {c.message}" for c in node.status.conditions or []]
        for p in core.list_namespaced_pod(CONTROLLER_NAMESPACE).items:
            containers = [(c.ready, c.restart_count, c.state) for c in p.status.container_statuses or []]
            lines.append(f"pod {p.metadata.name} {p.status.phase} {containers}")
        lines += [
            f"event {e.involved_object.name} {e.reason}: {e.message}"
            for e in core.list_namespaced_event(CONTROLLER_NAMESPACE).items
        ]
        (where / "cluster.txt").write_text("\n".join(lines) + "\n")
        print(f"Airflow's pod logs: {where}")


def test_airflow_in_pods_runs_t9k_jobs_under_the_charts_rbac(release, api_client, core, managed, unmanaged, airflow_images,
                                                              tmp_path):  # fmt: skip
    airflow_image, postgres_image = airflow_images
    pods = AirflowPods(api_client, managed, airflow_image, postgres_image)
    stamp = CreatorStamp(api_client, managed)
    jobs = Jobs(api_client, managed)
    try:
        # The tasks' Role, and the UI's read-only one (without the tab's actions) in the jobs' namespace.
        release.upgrade({"airflow.rbac.namespaces": [managed], "airflow.rbac.ui.actions": False})
        release.wait_ready()
        stamp.install()
        took = pods.start()
        print("Airflow in pods, seconds to: " + ", ".join(f"{stage} {s:.0f}" for stage, s in took.items()))

        # Nothing but the chart grants Airflow's accounts a right.
        assert _bindings_of_airflow(client.RbacAuthorizationV1Api(api_client)) == {
            (managed, f"{RELEASE}-tasks", f"{RELEASE}-tasks"),
            (managed, f"{RELEASE}-ui-read", f"{RELEASE}-ui-read"),
        }

        runs = {WORKER: pods.trigger(WORKER), DEFERRED: pods.trigger(DEFERRED),
                REFUSED: pods.trigger(REFUSED, {"namespace": unmanaged})}  # fmt: skip
        deferred: Obj = {}

        def ended() -> bool:
            ti = pods.ti(DEFERRED, runs[DEFERRED], "job")
            if ti.get("state") == "deferred" and (ti.get("trigger") or {}).get("triggerer_id") and not deferred:
                deferred.update(ti)  # its trigger, and the triggerer (a job id) that runs it, while it waits
            return all(pods.run_state(dag, run) in ENDED for dag, run in runs.items())

        # The components' identities are probed while the runs go on (each probe starts Python in
        # a pod: some 10 s in all, which the runs' own waits hide). With a client of its own: the
        # kubernetes client's exec stream swaps its client's request method while it runs.
        components = ("airflow-scheduler", "airflow-triggerer", "airflow-api-server", "airflow-dag-processor")
        prober = AirflowPods(client.ApiClient(api_client.configuration), managed, airflow_image, postgres_image)
        with ThreadPoolExecutor(1) as pool:
            probed = pool.submit(lambda: {pod: probe(prober, pod) for pod in components})
            wait_until(ended, timeout=420, interval=1, what="the three DAG runs ended")
            seen_in = probed.result()

        # Each component is who its ServiceAccount says, and holds no kubeconfig.
        for pod, account in (("airflow-scheduler", "airflow-worker"), ("airflow-triggerer", "airflow-triggerer"),
                             ("airflow-api-server", "airflow-api-server")):  # fmt: skip
            seen = seen_in[pod]
            assert seen["user"] == identity(account), (pod, seen)
            assert seen["KUBECONFIG"] is None, (pod, seen)
            assert not seen["kubeconfigs"], (pod, seen)
            assert not seen["home_kube"], (pod, seen)
        seen = seen_in["airflow-dag-processor"]  # parses DAGs only: no token at all
        assert not seen["token"], seen
        assert seen["user"] is None, seen
        worker_ip = pods.pod("airflow-scheduler").status.pod_ip
        kubernetes = core.read_namespaced_service("kubernetes", "default").spec.cluster_ip

        # On the worker: its own identity, submitted through the `kubernetes` Service, waited for there.
        assert pods.ti(WORKER, runs[WORKER], "whoami")["state"] == "success"
        assert pods.xcom(WORKER, runs[WORKER], "whoami", "return_value") == identity("airflow-worker")
        for dag, result in ((WORKER, {"acc": 0.91}), (DEFERRED, {"acc": 0.93})):
            ti = pods.ti(dag, runs[dag], "job")
            assert ti["state"] == "success", ti
            assert ti["try_number"] == 1, ti
            assert ti["hostname"] == worker_ip, ti  # run (and for the deferred one, resumed) in the scheduler's pod
            assert pods.xcom(dag, runs[dag], "job", "result") == result
            submitted = pods.xcom(dag, runs[dag], "job", "t9k_job")
            assert submitted["namespace"] == managed, submitted
            # In-cluster: through the `kubernetes` Service, not the address the host's kubeconfig names.
            assert submitted["server"] == f"https://{kubernetes}:443", submitted
            job = jobs.get("GenericJob", submitted["name"])
            assert job["status"]["phase"] == "Succeeded", (dag, job["status"])
            assert job["metadata"]["annotations"][CREATED_BY] == identity("airflow-worker"), (dag, job["metadata"])

        # Deferred: the trigger waited in the triggerer's pod (its account is bound by the chart only).
        assert deferred, "the deferred task was never seen deferred to a triggerer"
        assert deferred["trigger"]["classpath"] == "airflow_t9k.triggers.job.T9kJobTrigger", deferred
        # (The REST API's `triggerer_job` of a task instance is the job that queued it: the triggerer
        # is the one the trigger names.)
        triggerers = {j["id"]: j["hostname"] for j in pods.api("GET", "jobs?job_type=TriggererJob")["jobs"]}
        assert triggerers.get(deferred["trigger"]["triggerer_id"]) == pods.pod("airflow-triggerer").status.pod_ip, (
            deferred,
            triggerers,
        )

        # Refused outside its Role, by the API server, as the worker's account.
        assert pods.ti(REFUSED, runs[REFUSED], "outside_the_role")["state"] == "success"
        answer = pods.xcom(REFUSED, runs[REFUSED], "outside_the_role", "return_value")
        assert answer["status"] == 403, answer
        assert f'User "{identity("airflow-worker")}" cannot create resource "genericjobs"' in answer["server"], answer
        assert f'in the namespace "{unmanaged}"' in answer["server"], answer
        assert stamp.api.list_namespaced_custom_object(GROUP, VERSION, unmanaged, "genericjobs")["items"] == []

        # The UI's identity, read only, serves the T9k Jobs page and the T9k Job tab.
        status, page = pods.call("GET", "/t9k/api/jobs")
        assert status == 200, page
        names = {row["name"]: row["phase"] for row in page["jobs"]}
        for dag in (WORKER, DEFERRED):
            assert names.get(pods.xcom(dag, runs[dag], "job", "t9k_job")["name"]) == "Succeeded", page
        status, tab = pods.call("GET", f"/t9k/api/dags/{WORKER}/runs/{runs[WORKER]}/tasks/job/job")
        assert status == 200, tab
        assert tab["job"]["phase"] == "Succeeded", tab
        assert tab["job"]["namespace"] == managed, tab
        # ... and changes nothing: its Pause is the API server's refusal to the UI's own account
        # (the workers' account may patch jobs; this one may not).
        status, paused = pods.call("POST", f"/t9k/api/dags/{WORKER}/runs/{runs[WORKER]}/tasks/job/job/pause", {})
        assert status == 502, (status, paused)
        assert paused["kubernetes_status"] == 403, paused
        name = pods.xcom(WORKER, runs[WORKER], "job", "t9k_job")["name"]
        assert not ((jobs.get("GenericJob", name)["spec"].get("runMode") or {}).get("pause") or {}).get("enabled")
    except BaseException:
        _save_logs(pods, core, tmp_path / "airflow")  # only a failure needs them, and they take seconds
        raise
    finally:
        pods.remove()
        stamp.remove()
        release.upgrade()
