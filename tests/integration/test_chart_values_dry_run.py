"""The chart rendered with every value issue 46 added (names overridden, the controller pod's
extra env, volumes, mounts, sidecar and spread constraints, JSON logs, the roles for people
unaggregated, the Grafana dashboard) is accepted by the local API server: a server-side dry run,
validated, defaulted and admitted, nothing stored. The free-form values are Kubernetes objects the
schema leaves to the API server; this is where they are checked."""

from __future__ import annotations

import subprocess
import uuid

import yaml

from tests.integration.test_chart_dry_run import cluster_bin
from tests.support.chart import by_kind, render

VALUES = {
    "crds.install": False,
    "fullnameOverride": "ml-train",
    "nameOverride": "trainer",
    "controller.logFormat": "json",
    "extraEnv": [{"name": "NO_PROXY", "value": "$(KUBERNETES_SERVICE_HOST),.svc,.cluster.local"},
                 {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    "extraVolumes": [{"name": "proxy-ca", "configMap": {"name": "proxy-ca", "optional": True}}],
    "extraVolumeMounts": [{"name": "proxy-ca", "mountPath": "/etc/proxy-ca", "readOnly": True}],
    "extraContainers": [{"name": "sidecar", "image": "busybox", "command": ["sleep", "inf"]}],
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
    ],
    "rbac.aggregateToDefaultRoles": False,
    "metrics.grafanaDashboard.enabled": True,
    "networkPolicy.enabled": True,
}  # fmt: skip


def test_every_new_value_renders_objects_the_api_server_accepts(cluster, namespace, tmp_path):
    objs = render(VALUES, namespace=namespace, release=f"values-{uuid.uuid4().hex[:6]}")
    assert by_kind(objs, "ConfigMap")  # the dashboard
    assert [r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"] == "ml-train-job-editor"]
    (dep,) = by_kind(objs, "Deployment")
    assert dep["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["labelSelector"]
    # The release's own namespace is the test's; the dashboard ConfigMap goes there too.
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(objs))
    kubectl = subprocess.run([f"{cluster_bin()}/kubectl", "--kubeconfig", str(cluster.kubeconfig), "apply", "--server-side",
                              "--dry-run=server", "--field-manager", f"dry-run-{uuid.uuid4().hex[:6]}", "-f", str(manifest)],
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert kubectl.returncode == 0, kubectl.stderr[-5000:]
    accepted = [line for line in kubectl.stdout.splitlines() if line.endswith("(server dry run)")]
    assert len(accepted) == len(objs), (len(accepted), len(objs), kubectl.stdout[-3000:])
