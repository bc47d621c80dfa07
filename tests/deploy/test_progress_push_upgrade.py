"""The push endpoint's TLS as the chart installs it (progress.push.tls.source=controller, the
default; docs/progress.md, "TLS"), through a `helm upgrade` that replaces both controller pods
while a real replica pushes its progress to the Service: the upgrade renders the Secret empty
again, the new controllers find the CA and certificate the first ones made and serve them, so the
replica, which got its CA bundle when it was created, keeps pushing to the end. No CA is minted by
the upgrade and nothing is written; the release holds no key (issue 46, item 5)."""

from __future__ import annotations

import base64
import socket
import ssl

import yaml
from cryptography import x509

from tests.real.support import RealPods, ensure_code, on_real_node, py
from tests.real.test_progress_push_real import ensure_helper
from tests.support.cluster import wait_until
from tests.support.deploy import CONTROLLER, NAMESPACE, RELEASE, rebuilt_image
from tests.support.push import CA_ANNOTATION

GK = "GenericJob"
SECRET = f"{CONTROLLER}-progress-certs"
SERVICE_NAME = f"{CONTROLLER}-progress.{NAMESPACE}.svc"
STEPS, PAUSE = 300, "0.4"  # two minutes of reports: the upgrade (about 20 s to 60 s) falls inside


def _secret(release) -> dict[str, bytes]:
    data = release.core.read_namespaced_secret(SECRET, NAMESPACE).data or {}
    return {k: base64.b64decode(v) for k, v in data.items()}


def _served(ip: str, bundle: str) -> x509.Certificate:
    """The certificate a controller pod serves on its progress port to a client trusting ``bundle``
    and verifying the Service's name, as the replica's helper does."""
    ctx = ssl.create_default_context(cadata=bundle)
    with socket.create_connection((ip, 8443), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=SERVICE_NAME) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_a_replica_keeps_pushing_through_a_helm_upgrade_and_the_ca_stays(release, jobs):
    release.wait_ready()
    before = _secret(release)
    assert set(before) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}  # made by the controllers at install
    manifest = release.helm("get", "manifest", RELEASE, "--namespace", NAMESPACE).stdout
    (rendered,) = [d for d in yaml.safe_load_all(manifest) if d and d["kind"] == "Secret" and d["metadata"]["name"] == SECRET]
    assert "data" not in rendered  # what Helm keeps of the release holds no key
    assert "PRIVATE KEY" not in manifest

    ensure_code(jobs.core, jobs.ns)
    ensure_helper(jobs.core, jobs.ns)
    template = on_real_node({"spec": {"containers": [{
        "name": "main", "command": py("push_progress.py", str(STEPS), PAUSE),
        "env": [{"name": "PYTHONPATH", "value": "/helper"}, {"name": "T9K_PROGRESS_MIN_INTERVAL", "value": "1"}],
        "volumeMounts": [{"name": "helper", "mountPath": "/helper/airflow_t9k"}],
        "resources": {"limits": {"cpu": "200m", "memory": "200Mi"}}}],
        "volumes": [{"name": "helper", "configMap": {"name": "helper"}}]}})  # fmt: skip
    jobs.create({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GK, "metadata": {"name": "pusher"},
                 "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template}]}})  # fmt: skip
    real = RealPods(jobs.core, jobs.ns)

    def step() -> int:
        return int(((jobs.get(GK, "pusher").get("status") or {}).get("progress") or {}).get("step") or 0)

    wait_until(lambda: step() >= 5, timeout=120, interval=0.5, what="pushed progress before the upgrade")
    bundle = real.pod("pusher-worker-0").metadata.annotations[CA_ANNOTATION]
    assert bundle == before["ca.crt"].decode()  # the pod got the Secret's CA when it was created

    old_pods = {p.metadata.name for p in release.pods()}
    took = release.upgrade(image=rebuilt_image(release.image, "push-tls"))
    new_pods = release.wait_ready()
    assert old_pods.isdisjoint(p.metadata.name for p in new_pods)  # both controllers replaced
    at_upgrade = step()
    print(f"\npush TLS: `helm upgrade` took {took:.1f} s; the replica had pushed step {at_upgrade} of {STEPS}")
    assert at_upgrade < STEPS - 20, "the replica ended before the upgrade did: nothing shown"

    assert _secret(release) == before  # no CA minted, no certificate issued: the upgrade rendered it empty again
    for p in new_pods:  # every new replica serves the certificate the pod's old bundle verifies
        assert _served(p.status.pod_ip, bundle) == x509.load_pem_x509_certificate(before["tls.crt"])
        log = release.log(p.metadata.name)
        assert f"serving the certificate from Secret {NAMESPACE}/{SECRET}" in log, log[-3000:]
        assert "wrote Secret" not in log, log[-3000:]

    wait_until(lambda: step() >= at_upgrade + 10, timeout=120, interval=0.5, what="pushed progress after the upgrade")
    done = real.finished(jobs, GK, "pusher", ["pusher-worker-0"])
    assert done["status"]["phase"] == "Succeeded", real.describe("pusher-worker-0")
    assert done["status"]["progress"]["step"] == STEPS  # the last report reached the new leader
    log = real.log("pusher-worker-0")
    assert "CERTIFICATE_VERIFY_FAILED" not in log, log[-3000:]  # the endpoint never served a certificate it did not trust
    assert "T9K_PROGRESS" not in log  # the values came by the push path
