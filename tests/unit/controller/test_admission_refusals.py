"""A pod the namespace's policy refuses fails the job (it would be refused every time); a 403
from the controller's own RBAC is retried. And the optional admission policy covers every kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.controller.apply import refused_by_policy
from airflow_t9k.k8s.errors import Forbidden

POLICY = Path(__file__).resolve().parents[3] / "deploy" / "optional" / "admission-policy.yaml"

CASES = [
    (
        "pod security",
        'pods "j-worker-0" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostPID=true)',
        True,
    ),
    ("admission policy", "pods \"x\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no", True),
    ("webhook", 'admission webhook "v.example.com" denied request: no hostPath', True),
    (
        "our RBAC",
        'pods is forbidden: User "system:serviceaccount:s:c" cannot create resource "pods" in API group "" in the namespace "n"',
        False,
    ),
    ("empty", "", False),
]


@pytest.mark.parametrize(("message", "policy"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_which_refusals_fail_the_job(message, policy):
    assert refused_by_policy(Forbidden(403, "Forbidden", message)) is policy


def test_the_admission_policy_matches_every_kind_on_create_and_update():
    policy, binding = yaml.safe_load_all(POLICY.read_text())
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    covered = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert covered == {(res.group, res.plural) for res in RESOURCES.values()}
    assert all(set(rule["operations"]) == {"CREATE", "UPDATE"} for rule in rules)
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
