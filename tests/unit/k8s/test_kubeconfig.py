"""kubeconfig.py: which server, headers and TLS settings a kubeconfig (or a pod) gives, which
configurations go to kubernetes_asyncio's loader instead, and clear errors that hold no secret."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_t9k.k8s import kubeconfig
from airflow_t9k.k8s.kubeconfig import Endpoint, KubeconfigError, NeedsFullLoader, TokenSource

SECRET = "s3cr3t-t0ken-value"
B64 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n").decode()


def config(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443", **(cluster or {})}}],
        "users": [{"name": "u", "user": user if user is not None else {"token": SECRET}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }  # fmt: skip
    doc.update(top)
    return doc


def settings(ep: Endpoint) -> dict[str, Any]:
    """What the transport will use, minus what is None/False (the table stays readable)."""
    out = {"url": ep.server, "headers": ep.headers()}
    for key in ("ca_file", "ca_data", "insecure", "tls_server_name", "cert_file", "key_file", "cert_data", "key_data"):
        if getattr(ep, key):
            out[key] = getattr(ep, key)
    return out


BASE = Path("/etc/kube")
AUTH = {"Authorization": f"Bearer {SECRET}"}

CASES = [
    ("token, default trust", config(), {"url": "https://10.0.0.1:6443", "headers": AUTH}),
    ("trailing slash and a path prefix kept", config({"server": "https://rancher.example/k8s/clusters/c-1/"}),
     {"url": "https://rancher.example/k8s/clusters/c-1", "headers": AUTH}),
    ("relative CA file: against the kubeconfig's directory", config({"certificate-authority": "pki/ca.crt"}),
     {"url": "https://10.0.0.1:6443", "headers": AUTH, "ca_file": "/etc/kube/pki/ca.crt"}),
    ("absolute CA file", config({"certificate-authority": "/srv/ca.crt"}),
     {"url": "https://10.0.0.1:6443", "headers": AUTH, "ca_file": "/srv/ca.crt"}),
    ("CA data wins over the file", config({"certificate-authority": "ca.crt", "certificate-authority-data": B64}),
     {"url": "https://10.0.0.1:6443", "headers": AUTH, "ca_data": base64.b64decode(B64).decode()}),
    ("insecure and a TLS server name", config({"insecure-skip-tls-verify": True, "tls-server-name": "kubernetes"}),
     {"url": "https://10.0.0.1:6443", "headers": AUTH, "insecure": True, "tls_server_name": "kubernetes"}),
    ("client certificate files", config(user={"client-certificate": "u.crt", "client-key": "/k/u.key"}),
     {"url": "https://10.0.0.1:6443", "headers": {}, "cert_file": "/etc/kube/u.crt", "key_file": "/k/u.key"}),
    ("client certificate data", config(user={"client-certificate-data": B64, "client-key-data": B64}),
     {"url": "https://10.0.0.1:6443", "headers": {}, "cert_data": base64.b64decode(B64), "key_data": base64.b64decode(B64)}),
    ("token wins over tokenFile", config(user={"token": SECRET, "tokenFile": "/nonexistent"}),
     {"url": "https://10.0.0.1:6443", "headers": AUTH}),
    ("plain http without a token: no TLS settings read",
     config({"server": "http://127.0.0.1:8080", "certificate-authority": "x"}, user={}),
     {"url": "http://127.0.0.1:8080", "headers": {}}),
    ("no user at all", config(user={}), {"url": "https://10.0.0.1:6443", "headers": {}}),
    ("CA data wrapped over lines (a YAML block scalar)",
     config({"certificate-authority-data": B64[:20] + "\n" + B64[20:] + "\n"}),
     {"url": "https://10.0.0.1:6443", "headers": AUTH, "ca_data": base64.b64decode(B64).decode()}),
    ("empty CA data: the file is used, as client-go",
     config({"certificate-authority-data": "", "certificate-authority": "ca.crt"}),
     {"url": "https://10.0.0.1:6443", "headers": AUTH, "ca_file": "/etc/kube/ca.crt"}),
    ("empty client data: the files are used", config(user={"client-certificate-data": "", "client-certificate": "u.crt",
                                                            "client-key-data": "", "client-key": "u.key"}),
     {"url": "https://10.0.0.1:6443", "headers": {}, "cert_file": "/etc/kube/u.crt", "key_file": "/etc/kube/u.key"}),
    ("the context's user is not listed: no credentials, as kubectl",
     config(contexts=[{"name": "c", "context": {"cluster": "k", "user": "nobody"}}]),
     {"url": "https://10.0.0.1:6443", "headers": {}}),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_kubeconfig_to_endpoint(doc, expected):
    assert settings(kubeconfig.parse(doc, BASE, None, "kubeconfig K")) == expected


@pytest.mark.parametrize(("value", "allowed"), [("true", True), ("1", True), ("", False), ("false", False)])
def test_a_token_over_http_only_when_asked(tmp_path, value, allowed):
    path = write(tmp_path, config({"server": "http://127.0.0.1:8001"}))
    env = {"KUBECONFIG": str(path), "T9K_ALLOW_HTTP_TOKEN": value}
    if allowed:
        assert kubeconfig.load(env=env).headers() == AUTH
    else:
        with pytest.raises(KubeconfigError, match="T9K_ALLOW_HTTP_TOKEN"):
            kubeconfig.load(env=env)


def test_context_chooses_cluster_and_user():
    doc = config()
    doc["clusters"].append({"name": "k2", "cluster": {"server": "https://other:443"}})
    doc["users"].append({"name": "u2", "user": {"token": "t2"}})
    doc["contexts"].append({"name": "c2", "context": {"cluster": "k2", "user": "u2"}})
    ep = kubeconfig.parse(doc, BASE, "c2", "K")
    assert (ep.server, ep.headers()) == ("https://other:443", {"Authorization": "Bearer t2"})
    assert kubeconfig.parse(doc, BASE, None, "K").server == "https://10.0.0.1:6443"  # current-context


FALLBACK = [
    ("exec plugin", config(user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}})),
    ("auth-provider", config(user={"auth-provider": {"name": "oidc", "config": {}}})),
    ("basic auth", config(user={"username": "a", "password": "b"})),
    ("impersonation", config(user={"token": "t", "as": "admin"})),
    ("proxy-url", config({"proxy-url": "http://proxy:3128"})),
]  # fmt: skip


@pytest.mark.parametrize("doc", [c[1] for c in FALLBACK], ids=[c[0] for c in FALLBACK])
def test_what_only_kubernetes_asyncio_reads_falls_back(doc):
    with pytest.raises(NeedsFullLoader):
        kubeconfig.parse(doc, BASE, None, "K")


def test_several_files_in_kubeconfig_env_fall_back(tmp_path):
    with pytest.raises(NeedsFullLoader):
        kubeconfig.load(env={"KUBECONFIG": f"{tmp_path}/a{os.pathsep}{tmp_path}/b"})


BAD = [
    ("not a mapping", ["a", "list"], "is not a kubeconfig"),
    ("no current-context", config(**{"current-context": ""}), "has no current-context; pass --context"),
    ("unknown context", config(**{"current-context": "nope"}), "no context named 'nope'"),
    ("unknown cluster", config(contexts=[{"name": "c", "context": {"cluster": "gone", "user": "u"}}]),
     "no cluster named 'gone'"),
    ("server without a scheme", config({"server": "10.0.0.1:6443"}), "server must be a URL"),
    ("CA data not base64", config({"certificate-authority-data": "%%%"}), "certificate-authority-data is not valid base64"),
    ("key data not base64", config(user={"client-certificate-data": B64, "client-key-data": SECRET + "%"}),
     "client-key-data is not valid base64"),
    ("certificate without its key", config(user={"client-certificate": "u.crt"}), "needs its key"),
    ("insecure not a boolean", config({"insecure-skip-tls-verify": "yes"}), "must be true or false"),
    ("a token over plain http", config({"server": "http://10.0.0.1:8080"}), "refusing to send a bearer token"),
    ("a token file over plain http", config({"server": "http://10.0.0.1:8080"}, user={"tokenFile": "/t"}),
     "refusing to send a bearer token"),
    # Issue 29, 8: the scheme is case-insensitive; "HTTP://" went past the check written for "http://".
    ("a token over plain HTTP", config({"server": "HTTP://10.0.0.1:8080"}), "refusing to send a bearer token"),
    ("a token over plain Http", config({"server": "Http://10.0.0.1:8080"}), "refusing to send a bearer token"),
    ("not http at all", config({"server": "ftp://10.0.0.1:8080"}), "must be an http or https URL"),
    ("insecure with CA data", config({"insecure-skip-tls-verify": True, "certificate-authority-data": B64}),
     "together with a certificate authority"),
    ("insecure with a CA file", config({"insecure-skip-tls-verify": True, "certificate-authority": "ca.crt"}),
     "together with a certificate authority"),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_kubeconfigs_say_what_is_wrong_and_hold_no_secret(doc, message):
    with pytest.raises(KubeconfigError, match=message) as err:
        kubeconfig.parse(doc, BASE, None, "kubeconfig K")
    assert SECRET not in str(err.value)


def write(tmp_path: Path, doc: Any, name: str = "config") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


def test_files_named_explicitly_or_by_env_and_the_default(tmp_path):
    named = write(tmp_path, config({"server": "https://named:1"}))
    by_env = write(tmp_path, config({"server": "https://env:1"}), "env")
    (tmp_path / "home" / ".kube").mkdir(parents=True)
    write(tmp_path / "home" / ".kube", config({"server": "https://home:1"}))
    env = {"KUBECONFIG": str(by_env), "HOME": str(tmp_path / "home")}
    assert kubeconfig.load(str(named), env=env).server == "https://named:1"
    assert kubeconfig.load(env=env).server == "https://env:1"
    assert kubeconfig.load(env={"HOME": str(tmp_path / "home")}).server == "https://home:1"


def test_a_yaml_error_names_the_line_not_the_content(tmp_path):
    path = write(tmp_path, f"users:\n- name: u\n  user: {{token: {SECRET}\n")
    with pytest.raises(KubeconfigError, match=r"is not valid YAML at line") as err:
        kubeconfig.load(str(path), env={})
    assert SECRET not in str(err.value)


def test_missing_named_file_is_an_error_missing_default_means_in_cluster(tmp_path):
    with pytest.raises(KubeconfigError, match="does not exist"):
        kubeconfig.load(str(tmp_path / "nope"), env={})
    with pytest.raises(KubeconfigError, match="KUBERNETES_SERVICE_HOST/PORT are not set"):
        kubeconfig.load(env={"HOME": str(tmp_path)})


def sa_dir(tmp_path: Path, token: str = SECRET) -> Path:
    d = tmp_path / "sa"
    d.mkdir(exist_ok=True)
    (d / "token").write_text(token + "\n")
    (d / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    return d


@pytest.mark.parametrize(("host", "url"), [("10.96.0.1", "https://10.96.0.1:443"), ("fd00::1", "https://[fd00::1]:443")])
def test_in_cluster(tmp_path, host, url):
    env = {"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    ep = kubeconfig.load(env=env, sa_dir=sa_dir(tmp_path))
    assert settings(ep) == {"url": url, "headers": AUTH, "ca_file": str(tmp_path / "sa" / "ca.crt")}


def test_a_broken_default_kubeconfig_in_a_pod_means_in_cluster(tmp_path):
    (tmp_path / ".kube").mkdir()
    write(tmp_path / ".kube", {"not": "a kubeconfig"})
    env = {"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert kubeconfig.load(env=env, sa_dir=sa_dir(tmp_path)).source == "in-cluster"
    with pytest.raises(KubeconfigError, match="has no current-context"):  # outside a pod: the kubeconfig's fault
        kubeconfig.load(env={"HOME": str(tmp_path)})


def test_in_cluster_without_the_ca_is_an_error(tmp_path):
    d = sa_dir(tmp_path)
    (d / "ca.crt").unlink()
    env = {"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(KubeconfigError, match="CA .* is missing or empty"):
        kubeconfig.load(env=env, sa_dir=d)


def test_token_files_are_read_again_after_the_refresh_period(tmp_path):
    path = tmp_path / "token"
    path.write_text("one\n")
    source = TokenSource(path=str(path), refresh=0.05)
    assert source.header() == "Bearer one"
    path.write_text("two")
    assert source.header() == "Bearer one"  # within the period: no read
    time.sleep(0.06)
    assert source.header() == "Bearer two"
    path.unlink()  # the kubelet swaps the file; a failed read keeps the last token
    time.sleep(0.06)
    assert source.header() == "Bearer two"


def test_token_file_missing_or_empty_at_start(tmp_path):
    with pytest.raises(KubeconfigError, match="cannot read the token file"):
        TokenSource(path=str(tmp_path / "none"))
    (tmp_path / "empty").write_text("")
    with pytest.raises(KubeconfigError, match="is empty"):
        TokenSource(path=str(tmp_path / "empty"))


def test_token_file_relative_to_the_kubeconfig(tmp_path):
    (tmp_path / "tok").write_text(SECRET)
    path = write(tmp_path, config(user={"tokenFile": "tok"}))
    assert kubeconfig.load(str(path), env={}).headers() == AUTH


def test_no_secret_in_repr():
    ep = kubeconfig.parse(config(user={"token": SECRET, "client-certificate-data": B64, "client-key-data": B64}),
                          BASE, None, "K")  # fmt: skip
    assert SECRET not in repr(ep)
    assert B64 not in repr(ep)
    assert "not really" not in repr(ep)


def test_unloadable_certificates_are_clear_errors_without_their_content(tmp_path):
    ep = kubeconfig.parse(config({"certificate-authority-data": B64}), BASE, None, "kubeconfig K")
    with pytest.raises(KubeconfigError, match="certificate authority cannot be loaded") as err:
        ep.ssl_context()
    assert "not really" not in str(err.value)
    ep = kubeconfig.parse(config(user={"client-certificate-data": B64, "client-key-data": B64}), BASE, None, "K")
    with pytest.raises(KubeconfigError, match="client certificate or key cannot be loaded") as err:
        ep.ssl_context()
    assert "not really" not in str(err.value)
    ep = kubeconfig.parse(config({"certificate-authority": "missing.crt"}), tmp_path, None, "K")
    with pytest.raises(KubeconfigError, match="certificate authority cannot be loaded"):
        ep.ssl_context()


def test_empty_token_falls_back_to_token_file(tmp_path):
    (tmp_path / "tok").write_text(SECRET)
    path = write(tmp_path, config(user={"token": "", "tokenFile": "tok"}))
    assert kubeconfig.load(str(path), env={}).headers() == AUTH


def test_relative_paths_follow_the_kubeconfig_link_not_its_target(tmp_path):
    """A kubeconfig mounted from a Secret is a link into a directory replaced on rotation
    (config -> ..data/config -> ..2026_x/config): paths must not be pinned to the old one."""
    (tmp_path / "mount" / "..2026_x").mkdir(parents=True)
    write(tmp_path / "mount" / "..2026_x", config(user={"tokenFile": "tok"}))
    (tmp_path / "mount" / "..data").symlink_to("..2026_x")
    (tmp_path / "mount" / "config").symlink_to("..data/config")
    (tmp_path / "mount" / "..2026_x" / "tok").write_text(SECRET)
    (tmp_path / "mount" / "tok").symlink_to("..data/tok")
    ep = kubeconfig.load(str(tmp_path / "mount" / "config"), env={})
    assert ep.token is not None
    assert ep.token.path == os.path.join(str(tmp_path / "mount"), "tok")
    assert ep.headers() == AUTH
