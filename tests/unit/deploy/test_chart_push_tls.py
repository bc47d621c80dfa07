"""The progress endpoint's TLS as the chart renders it (docs/progress.md, "TLS"), without a cluster
as Argo CD and `helm template` render it: the same bytes every time, no private key, and by
default (progress.push.tls.source=controller) an empty Secret the controllers fill, the flags that
tell them its name and the Service's names, the few rights it takes and the admission policy's one
exception for it. A certificate the controller makes for those names serves a real handshake.

Against the real API server: tests/integration/test_progress_certs.py (two replicas racing, a
renewal reloaded); installed and upgraded while pods push: tests/deploy/test_progress_push_upgrade.py."""

from __future__ import annotations

import datetime
import ssl

import pytest

from tests.support.chart import by_kind, granted, render, template
from tests.support.tls import handshake

NS = "ml-platform"
SVC = "airflow-t9k-controller-progress"
SECRET = "airflow-t9k-controller-progress-certs"
HOSTS = [f"{SVC}.{NS}.svc", f"{SVC}.{NS}.svc.cluster.local"]
CERT_MANAGER = {"progress.push.tls.source": "certManager",
                "progress.push.tls.certManager.issuerRef": {"name": "team-ca", "kind": "ClusterIssuer"}}  # fmt: skip
SOURCES = {
    "controller": {},
    "secret": {"progress.push.tls.source": "secret", "progress.push.tls.secretName": "team-tls"},
    "certManager": CERT_MANAGER,
}


def _objs(**values) -> list[dict]:
    return render({"crds.install": False, "controllerPolicy.enabled": True, **values}, namespace=NS)


def _container(objs: list[dict]) -> dict:
    (dep,) = by_kind(objs, "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


@pytest.mark.parametrize("source", SOURCES)
def test_two_renders_without_a_cluster_are_the_same_bytes_and_hold_no_key(source):
    """What Argo CD and `helm template` do: no `lookup`, no `genCA`, so nothing a render makes
    differs from the next and nothing secret is in the manifests (for every source)."""
    values = {"crds.install": False, **SOURCES[source]}
    first, second = (template(values, namespace=NS).stdout for _ in range(2))
    assert first == second
    assert "PRIVATE KEY" not in first
    assert "BEGIN CERTIFICATE" not in first
    for secret in by_kind(render(values, namespace=NS), "Secret"):
        assert "data" not in secret, secret
        assert "stringData" not in secret, secret


def test_by_default_the_controllers_keep_an_empty_secret_the_chart_renders():
    objs = _objs()
    (secret,) = by_kind(objs, "Secret")
    assert secret["metadata"]["name"] == SECRET
    assert secret["metadata"]["namespace"] == NS
    assert secret["type"] == "Opaque"  # not kubernetes.io/tls: that type needs its keys at creation
    assert "annotations" not in secret["metadata"]  # goes with `helm uninstall`, its CA key with it
    assert by_kind(objs, "Certificate") == []
    c = _container(objs)
    tls_args = [a for a in c["args"] if a.startswith("--progress-tls")]
    assert tls_args == [f"--progress-tls-secret={SECRET}", *(f"--progress-tls-dns-name={h}" for h in HOSTS),
                        "--progress-tls-cert-days=90", "--progress-tls-ca-days=3650"]  # fmt: skip
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in c["env"]
    assert "volumeMounts" not in c  # read through the API, not a volume: every replica sees a write at once
    (dep,) = by_kind(objs, "Deployment")
    assert "volumes" not in dep["spec"]["template"]["spec"]


def test_the_rights_are_that_one_secret_by_name_and_create_in_the_releases_namespace():
    """get, watch and update by resourceNames; create cannot be limited to a name (the object
    does not exist yet), so it is granted on Secrets of the release's namespace only."""
    objs = _objs()
    (role,) = [r for r in by_kind(objs, "Role") if r["metadata"]["name"] == "airflow-t9k-controller-progress-tls"]
    assert role["metadata"]["namespace"] == NS
    assert granted(role["rules"]) == {("", "secrets", v, SECRET) for v in ("get", "watch", "update")} | {
        ("", "secrets", "create", "*")
    }
    (binding,) = [b for b in by_kind(objs, "RoleBinding") if b["metadata"]["name"] == "airflow-t9k-controller-progress-tls"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "airflow-t9k-controller", "namespace": NS}]
    # No other rule names a Secret beyond create (the SSH keys): nothing reads Secrets elsewhere.
    for r in [*by_kind(objs, "Role"), *by_kind(objs, "ClusterRole")]:
        if r is role:
            continue
        assert {v for g, res, v, _ in granted(r.get("rules") or []) if res == "secrets"} <= {"create"}, r["metadata"]


def test_the_controllers_admission_policy_lets_it_write_that_secret_and_no_other():
    objs = _objs()
    (policy,) = [p for p in by_kind(objs, "ValidatingAdmissionPolicy") if p["metadata"]["name"].endswith("controller-writes")]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["progressTLS"] == (
        f"request.namespace == '{NS}' && request.resource.group == '' && request.resource.resource == 'secrets' "
        f"&& request.name == '{SECRET}' && request.operation in ['CREATE', 'UPDATE']"
    )
    scope, owned, _ = (v["expression"] for v in policy["spec"]["validations"])
    assert scope.startswith("variables.progressTLS || (!(request.namespace in ['ml-platform'")
    assert owned == "variables.progressTLS || variables.ownedByAJob"
    for source in ("secret", "certManager"):  # the controllers write no Secret of their own
        other = _objs(**SOURCES[source])
        (p,) = [p for p in by_kind(other, "ValidatingAdmissionPolicy") if p["metadata"]["name"].endswith("controller-writes")]
        assert {v["name"]: v["expression"] for v in p["spec"]["variables"]}["progressTLS"] == "false"
        assert [r for r in by_kind(other, "Role") if r["metadata"]["name"].endswith("progress-tls")] == []


@pytest.mark.parametrize("source", ["secret", "certManager"])
def test_the_other_sources_mount_their_secret_and_are_given_as_files(source):
    objs = _objs(**SOURCES[source])
    c = _container(objs)
    tls = "/etc/airflow-t9k/progress-tls"
    assert [a for a in c["args"] if a.startswith("--progress-tls")] == [
        f"--progress-tls-cert={tls}/tls.crt", f"--progress-tls-key={tls}/tls.key", f"--progress-tls-ca={tls}/ca.crt"]  # fmt: skip
    name = "team-tls" if source == "secret" else "airflow-t9k-controller-progress-tls"
    (dep,) = by_kind(objs, "Deployment")
    (volume,) = dep["spec"]["template"]["spec"]["volumes"]
    assert volume["secret"]["secretName"] == name
    assert by_kind(objs, "Secret") == []  # the user's, or cert-manager's
    if source == "certManager":
        (cert,) = by_kind(objs, "Certificate")
        assert (cert["spec"]["secretName"], cert["spec"]["dnsNames"]) == (name, HOSTS)


@pytest.mark.parametrize(
    ("values", "messages"),
    [
        # Helm's lookup and genCA are gone: the schema's enum, or the chart's own words without it.
        ({"progress.push.tls.source": "helm"}, ("value must be one of 'controller', 'secret', 'certManager'",
                                                 "progress.push.tls.source=helm is gone")),
        ({"progress.push.tls.source": "vault"}, ("value must be one of 'controller', 'secret', 'certManager'",
                                                  "progress.push.tls.source must be controller, secret or certManager")),
        ({"progress.push.tls.certDays": 3650}, ("certDays must be less than progress.push.tls.caDays",)),
    ],
)  # fmt: skip
def test_values_that_cannot_work_are_refused(values, messages):
    out = template({"crds.install": False, **values}, namespace=NS, check=False)
    assert out.returncode != 0
    assert any(m in out.stderr for m in messages), out.stderr


def test_a_certificate_the_controller_makes_for_the_charts_names_serves_a_real_handshake(tmp_path):
    """The names the chart gives the controller, into plan_certs as the controller does; a client
    trusting only ca.crt (what a replica's pod gets) verifies the Service's name, and refuses
    another."""
    from airflow_t9k.controller.certs import plan_certs

    names = [a.split("=", 1)[1] for a in _container(_objs())["args"] if a.startswith("--progress-tls-dns-name=")]
    data = plan_certs(None, names, datetime.datetime.now(datetime.timezone.utc))
    assert data is not None
    for host, ok in ((HOSTS[0], True), (HOSTS[1], True), (f"{SVC}.other.svc", False)):
        if ok:
            handshake(data["tls.crt"], data["tls.key"], data["ca.crt"], host, tmp_path)
        else:
            with pytest.raises(ssl.SSLCertVerificationError):
                handshake(data["tls.crt"], data["tls.key"], data["ca.crt"], host, tmp_path)
