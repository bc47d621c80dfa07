"""Attack: the admission policy's service-account allow-list checks ``serviceAccountName``, but a
job's pod can carry another account's token by mounting a legacy token Secret (type
``kubernetes.io/service-account-token``), which the token controller fills with a long-lived
token for whatever account it names. A co-tenant with ordinary edit rights makes one for a
powerful account of the namespace. deploy/optional/admission-policy-token-secrets.yaml refuses
that Secret where it is bound (issue 29, 6); without it the token is minted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.security.test_ssh_launch import _edit_identity
from tests.support.cluster import wait_until

POLICY = Path(__file__).resolve().parents[2] / "deploy" / "optional" / "admission-policy-token-secrets.yaml"


def _token_secret(name: str, account: str) -> dict:
    return {"metadata": {"name": name, "annotations": {"kubernetes.io/service-account.name": account}},
            "type": "kubernetes.io/service-account-token"}  # fmt: skip


@pytest.fixture
def token_policy(api_client, core, namespace) -> Iterator[str]:
    """The shipped policy under a unique name, bound to this test's namespace by the label its
    binding selects (as a job namespace would carry it)."""
    suffix = uuid.uuid4().hex[:6]
    policy, binding = yaml.safe_load_all(POLICY.read_text())
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"airflow-t9k.io/jobs": "enabled"}}
    label = f"sec-{suffix}.airflow-t9k.io/jobs"
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = (
        f"airflow-t9k-token-secrets-{suffix}"
    )
    binding["spec"]["matchResources"]["namespaceSelector"] = {"matchLabels": {label: "enabled"}}
    core.patch_namespace(namespace, {"metadata": {"labels": {label: "enabled"}}})
    adm = client.AdmissionregistrationV1Api(api_client)
    adm.create_validating_admission_policy(policy)
    adm.create_validating_admission_policy_binding(binding)
    try:
        yield policy["metadata"]["name"]
    finally:
        adm.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        adm.delete_validating_admission_policy(policy["metadata"]["name"])


def _powerful_account(core, namespace: str) -> str:
    name = f"ops-{uuid.uuid4().hex[:6]}"  # stands for any account with more rights than `default`
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    return name


def test_without_the_policy_a_co_tenant_mints_another_accounts_token(core, api_client, cluster, namespace, tmp_path):
    """The threat, as it is without the policy: the token controller fills the Secret in."""
    tenant = _edit_identity(core, api_client, cluster, namespace, tmp_path)
    account = _powerful_account(core, namespace)
    tenant.create_namespaced_secret(namespace, _token_secret("minted", account))
    wait_until(lambda: (core.read_namespaced_secret("minted", namespace).data or {}).get("token"), timeout=30,
               what="the token controller filling the legacy token Secret")  # fmt: skip


def test_the_policy_refuses_a_token_secret_for_an_account_outside_the_allow_list(
    core, api_client, cluster, namespace, tmp_path, token_policy
):
    tenant = _edit_identity(core, api_client, cluster, namespace, tmp_path)
    account = _powerful_account(core, namespace)

    def refused() -> str | None:
        name = f"t-{uuid.uuid4().hex[:6]}"
        try:
            tenant.create_namespaced_secret(namespace, _token_secret(name, account))
        except ApiException as exc:
            return f"{exc.status} {exc.body}"
        core.delete_namespaced_secret(name, namespace)
        return None

    why = wait_until(refused, timeout=30, what="the policy in effect")
    assert (why[:3], token_policy in why, account in why) == ("403", True, True), why
    tenant.create_namespaced_secret(namespace, _token_secret("for-default", "default"))  # the allowed account
    tenant.create_namespaced_secret(namespace, {"metadata": {"name": "plain"}, "stringData": {"k": "v"}})  # other Secrets
