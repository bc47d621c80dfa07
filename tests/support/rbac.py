"""Cluster-scoped RBAC objects (and admission policies) a test applied from deploy/, removed again afterwards."""

from __future__ import annotations

from typing import Any

from kubernetes import client


def delete_cluster_scoped(api_client: client.ApiClient, docs: list[dict[str, Any]]) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    for d in docs:
        if d["kind"] == "ClusterRole":
            rbac.delete_cluster_role(d["metadata"]["name"])
        elif d["kind"] == "ClusterRoleBinding":
            rbac.delete_cluster_role_binding(d["metadata"]["name"])
        elif d["kind"] == "ValidatingAdmissionPolicyBinding":
            client.AdmissionregistrationV1Api(api_client).delete_validating_admission_policy_binding(d["metadata"]["name"])
        elif d["kind"] == "ValidatingAdmissionPolicy":
            client.AdmissionregistrationV1Api(api_client).delete_validating_admission_policy(d["metadata"]["name"])


def account_kubeconfig(core: client.CoreV1Api, kubeconfig: Any, namespace: str, account: str, path: Any) -> Any:
    """A kubeconfig at ``path`` that is ``account`` (a ServiceAccount of ``namespace`` that exists):
    a token from the TokenRequest API, with ``kubeconfig``'s cluster and CA."""
    import yaml

    token = core.create_namespaced_service_account_token(account, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    with open(kubeconfig) as f:
        base = yaml.safe_load(f.read())
    base["users"] = [{"name": "sa", "user": {"token": token}}]
    base["contexts"][0]["context"]["user"] = "sa"
    with open(path, "w") as f:
        f.write(yaml.safe_dump(base))
    return path


def account_client(core: client.CoreV1Api, kubeconfig: Any, namespace: str, account: str, path: Any) -> client.ApiClient:
    """An API client that is ``account`` (``account_kubeconfig``)."""
    from kubernetes import config

    return config.new_client_from_config(config_file=str(account_kubeconfig(core, kubeconfig, namespace, account, path)))


def token_kubeconfig(api_client: client.ApiClient, kubeconfig: Any, namespace: str, name: str, rules: list[dict[str, Any]],
                     path: Any) -> Any:  # fmt: skip
    """A real ServiceAccount ``name`` in ``namespace`` with a Role of exactly ``rules``, and a
    kubeconfig at ``path`` holding its token (the cluster and CA of ``kubeconfig``)."""
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})  # fmt: skip
    return account_kubeconfig(core, kubeconfig, namespace, name, path)


def airflow_rules(job_verbs: tuple[str, ...] = ("create", "get", "list", "watch", "patch", "delete")) -> list[dict[str, Any]]:
    """deploy/rbac-airflow-namespace.yaml's rules for GenericJobs, with ``job_verbs`` on the jobs."""
    return [
        {"apiGroups": ["batch.tensorstack.dev"], "resources": ["genericjobs"], "verbs": list(job_verbs)},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
    ]


def refusal(call: Any) -> str | None:
    """None when ``call()`` went through, else the API server's refusal: "<status> <body>"."""
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as exc:
        return f"{exc.status} {exc.body}"
    return None
