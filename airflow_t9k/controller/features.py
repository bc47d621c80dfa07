"""What the cluster offers, found out when the controller starts (issue 30, items 1 and 4).

- **In-place restarts** (Kubernetes 1.36: container restart rules, KEP-5307, and their
  ``RestartAllContainers`` action, KEP-5532; both beta and on by default). The API server's part
  is asked with a dry run: a pod with a ``RestartAllContainers`` rule is refused (422) where the
  action's feature gate is off and comes back without its rules where ``ContainerRestartRules``
  is off. The nodes' part is their ``status.declaredFeatures`` (KEP-5328): the scheduler places
  such a pod only on a node that declares ``RestartAllContainersOnContainerExits``, so the
  controller uses them only where **every** node declares it (a pod must never become
  unschedulable because it restarts faster). Nodes added later with an older kubelet still get
  no in-place pod (the scheduler keeps them off); restart the controller to look again.
- **Gang scheduling without add-ons** (Kubernetes 1.35+: the Workload API, KEP-4671, alpha): the
  API server serves ``scheduling.k8s.io/v1alpha2`` PodGroups (feature gate ``GenericWorkload``,
  ``--runtime-config=scheduling.k8s.io/v1alpha2=true``); whether kube-scheduler enforces them
  (feature gate ``GangScheduling``) cannot be read through the API, so a served PodGroup API is
  taken as the scheduler's too (the local cluster turns both on together; docs/queueing.md).
- **DRA devices** (Kubernetes 1.34+: ``resource.k8s.io/v1``): the API server serves
  ResourceClaimTemplates, so the controller can read what a pod's claims ask for and count it
  in the job's usage (reconcile/dra.py, docs/usage.md).

Each answer is ``None`` when the feature is there, else one sentence saying why not.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_t9k.k8s.errors import ApiError, Forbidden, Invalid, NotFound

if TYPE_CHECKING:
    from airflow_t9k.k8s.client import Kube

Obj = dict[str, Any]
log = logging.getLogger(__name__)

FEATURE = "RestartAllContainersOnContainerExits"
GANG_API = "/apis/scheduling.k8s.io/v1alpha2"
DRA_API = "/apis/resource.k8s.io/v1"
NODES_NAMED = 3  # nodes named in the sentence; the rest are counted


def probe_pod() -> Obj:
    """A pod that Pod Security's ``restricted`` level admits, with a ``RestartAllContainers`` rule."""
    security = {"runAsNonRoot": True, "runAsUser": 65534, "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
    rule = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [86]}}
    container = {"name": "probe", "image": "registry.k8s.io/pause:3.10", "restartPolicy": "Never", "restartPolicyRules": [rule],
                 "securityContext": security}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "airflow-t9k-feature-probe-"},
            "spec": {"restartPolicy": "Never", "containers": [container]}}  # fmt: skip


async def detect_in_place(kube: Kube, namespace: str, nodes_too: bool = True) -> str | None:
    """None where in-place restarts work on this cluster, else why not (module docstring).
    ``nodes_too`` False (``--in-place-restarts=on``) asks the API server only: pods that restart in
    place then go to the nodes that declare the feature, and wait where none does."""
    try:
        made = await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", query={"dryRun": "All"}, body=probe_pod())
    except Invalid as exc:
        return f"the API server refuses the RestartAllContainers action (feature gate {FEATURE} off): {exc.message}"
    except ApiError as exc:
        return f"a dry-run pod in namespace {namespace} to test for it was refused: {exc.message}"
    kept = ((made.get("spec") or {}).get("containers") or [{}])[0].get("restartPolicyRules")
    if not kept:
        return "the API server drops container restart rules (feature gate ContainerRestartRules off)"
    if not nodes_too:
        return None
    try:
        nodes, _ = await kube.list_all("/api/v1/nodes")
    except Forbidden:
        return f"the controller may not list nodes (RBAC nodes: list) to see which declare {FEATURE}"
    except ApiError as exc:
        return f"nodes could not be listed: {exc.message}"
    return nodes_problem(nodes)


def nodes_problem(nodes: list[Obj]) -> str | None:
    """Every node must declare the feature; None when they do."""
    if not nodes:
        return "the cluster has no nodes"
    lacking = sorted(str((n.get("metadata") or {}).get("name")) for n in nodes
                     if FEATURE not in ((n.get("status") or {}).get("declaredFeatures") or []))  # fmt: skip
    if not lacking:
        return None
    named = ", ".join(lacking[:NODES_NAMED]) + (f" and {len(lacking) - NODES_NAMED} more" if len(lacking) > NODES_NAMED else "")
    return (f"{len(lacking)} of {len(nodes)} nodes ({named}) do not declare {FEATURE} in status.declaredFeatures "
            "(a kubelet before 1.36 or with the feature off, or a node no kubelet runs)")  # fmt: skip


async def detect_gang(kube: Kube) -> str | None:
    """None where the API server serves the Workload API's PodGroups, else why not."""
    try:
        doc = await kube.get(GANG_API)
    except NotFound:
        return (f"the API server does not serve {GANG_API[6:]} (feature gate GenericWorkload and "
                "--runtime-config=scheduling.k8s.io/v1alpha2=true)")  # fmt: skip
    except ApiError as exc:
        return f"the API server's {GANG_API[6:]} could not be read: {exc.message}"
    if not any(r.get("name") == "podgroups" for r in doc.get("resources") or []):
        return f"the API server serves {GANG_API[6:]} without PodGroups"
    return None


def claim_templates_path(namespace: str | None = None) -> str:
    """Where ResourceClaimTemplates are listed and watched: one namespace's, or every namespace's."""
    return f"{DRA_API}/namespaces/{namespace}/resourceclaimtemplates" if namespace else f"{DRA_API}/resourceclaimtemplates"


async def detect_dra(kube: Kube) -> str | None:
    """None where the API server serves ResourceClaimTemplates (resource.k8s.io/v1), else why not."""
    try:
        doc = await kube.get(DRA_API)
    except NotFound:
        return f"the API server does not serve {DRA_API[6:]} (Kubernetes 1.34 or later)"
    except ApiError as exc:
        return f"the API server's {DRA_API[6:]} could not be read: {exc.message}"
    if not any(r.get("name") == "resourceclaimtemplates" for r in doc.get("resources") or []):
        return f"the API server serves {DRA_API[6:]} without ResourceClaimTemplates"
    return None
