"""The controller as the chart runs it: two pods Running and Ready on the real node, one holding
the Lease, /healthz and /readyz answering on the pods' own addresses, in-cluster configuration
through the `kubernetes` Service (kube-proxy on the node), non-root on a read-only root
filesystem; a job in a namespace outside the default scope is told so."""

from __future__ import annotations

import urllib.error
import urllib.request

from tests.real.support import REAL_NODE
from tests.support.cluster import wait_until
from tests.support.deploy import CONTROLLER, NAMESPACE

GK = "GenericJob"


def _get(url: str) -> tuple[int, str]:
    """The status and body, whatever the status (a 503 from /readyz names the watches not ready)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_two_ready_pods_on_the_real_node_one_leads_and_the_probes_answer(release):
    pods = release.wait_ready()
    assert {p.spec.node_name for p in pods} == {REAL_NODE}
    names = {p.metadata.name for p in pods}
    leader = wait_until(release.leader, timeout=30, what="a holder of the Lease")
    assert leader in names, (leader, names)
    for p in pods:
        assert p.status.container_statuses[0].restart_count == 0, p.metadata.name
        assert p.status.container_statuses[0].image == release.image  # the image the chart was given, as built
        for path in ("/healthz", "/readyz"):
            status, body = _get(f"http://{p.status.pod_ip}:8081{path}")
            assert status == 200, (p.metadata.name, path, body)
    # The standby is Ready too (caches warm), and only the leader says it leads.
    logs = release.logs()
    assert "leader election on: lease" in logs[leader]
    dep = release.apps.read_namespaced_deployment(CONTROLLER, NAMESPACE)
    assert dep.status.ready_replicas == 2


def test_in_cluster_non_root_read_only(release):
    """The pods reach the API server at the `kubernetes` Service's cluster IP (no kubeconfig
    anywhere), as uid 65532 on a read-only root filesystem, with the chart's ServiceAccount."""
    for p in release.wait_ready():
        (c,) = p.spec.containers
        assert c.security_context.read_only_root_filesystem is True
        assert p.spec.security_context.run_as_user == 65532
        assert p.spec.service_account_name == CONTROLLER
        assert not any("kubeconfig" in a for a in (c.args or []) + (c.command or []))
        assert not any(e.name == "KUBECONFIG" for e in c.env or [])
    log = release.logs()[release.leader()]
    assert "caches synced" in log, log[-2000:]


def test_a_job_outside_the_selected_namespaces_is_told_so_and_gets_no_pod(release, api_client, unmanaged):
    from tests.support.jobs import Jobs

    jobs = Jobs(api_client, unmanaged)
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GK, "metadata": {"name": "outside"},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {
                     "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]}})  # fmt: skip
    cond = wait_until(lambda: jobs.condition(GK, "outside", "NamespaceNotManaged"), timeout=30, what="NamespaceNotManaged")
    assert "does not match the controller's --namespace-selector 'airflow-t9k.io/jobs=enabled'" in cond["message"]
    jobs.reasons("outside", "NamespaceNotManaged")
    assert jobs.pods("outside") == {}


def test_prometheus_scrapes_the_metrics_service_with_a_bound_token_only(release, api_client, core):
    """Issue 45, item 5: /metrics as the chart serves it, through its Service
    (<release>-controller-metrics, kube-proxy on the node): HTTPS, a token bound to
    <release>-metrics-reader gets the metrics; an unbound token and none are refused."""
    import http.client
    import ssl
    import uuid

    from kubernetes import client

    release.wait_ready()
    svc = core.read_namespaced_service(f"{CONTROLLER}-metrics", NAMESPACE)
    url = f"https://{svc.spec.cluster_ip}:{svc.spec.ports[0].port}/metrics"
    ns, suffix = NAMESPACE, uuid.uuid4().hex[:6]
    rbac = client.RbacAuthorizationV1Api(api_client)
    accounts = {"prometheus": f"prometheus-{suffix}", "stranger": f"stranger-{suffix}"}
    for sa in accounts.values():
        core.create_namespaced_service_account(ns, {"metadata": {"name": sa}})
    binding = f"metrics-{suffix}"
    rbac.create_cluster_role_binding({"metadata": {"name": binding}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "airflow-t9k-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": accounts["prometheus"], "namespace": ns}]})  # fmt: skip
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the controller's self-signed certificate

    def scrape(token: str | None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10, context=context) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except (OSError, http.client.HTTPException) as exc:  # a pod the Service still names, going (a rollout)
            return 0, repr(exc)

    try:
        spec = {"spec": {"expirationSeconds": 600}}
        tokens = {who: core.create_namespaced_service_account_token(sa, ns, spec).status.token for who, sa in accounts.items()}
        _, body = wait_until(lambda: (r := scrape(tokens["prometheus"]))[0] == 200 and r, timeout=30,
                                what="the metrics through the Service")  # fmt: skip
        assert "controller_runtime_reconcile_total" in body
        assert "process_resident_memory_bytes" in body
        assert wait_until(lambda: (c := scrape(tokens["stranger"])[0]) and c, timeout=30, what="an answer") == 403
        assert wait_until(lambda: (c := scrape(None)[0]) and c, timeout=30, what="an answer") == 401
    finally:
        rbac.delete_cluster_role_binding(binding)
        for sa in accounts.values():
            core.delete_namespaced_service_account(sa, ns)
