"""``airflow-t9k doctor --conn-id ID``: what a connection's identity can do, before a DAG finds out.

Airflow's connection Test button (the cncf provider's) asks only for ``/version``. A task also needs
the CRDs installed and the rights its workers and triggerer use (docs/install.md, "What each right
is for"); a missing one shows up hours later as a 403 in a task log. This asks the API server:

- ``/version``: the connection reaches a cluster and its credentials load;
- a LIST of each job kind in the namespace (limit 1): the CRD is installed and the kind readable;
- a SelfSubjectAccessReview for every right the tasks and the triggerer use (any authenticated
  identity may ask about itself).

Pure: ``needed`` and ``verdicts``; ``run`` does the I/O through the hook.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from airflow_t9k.api.paths import job_path
from airflow_t9k.api.resources import RESOURCES, resource_for
from airflow_t9k.k8s.errors import ApiError, NotFound

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(frozen=True)
class Right:
    group: str
    resource: str
    verb: str
    why: str
    subresource: str = ""

    def named(self) -> str:
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {what}{'.' + self.group if self.group else ''}"


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str


def needed(kinds: Iterable[str]) -> list[Right]:
    """Every right the operators (workers) and the trigger (triggerer) use, for these kinds."""
    rights = []
    for kind in kinds:
        r = resource_for(kind)
        for verb, why in (("create", "submit"), ("get", "reattach, wait"), ("list", "find a job by labels, the trigger's watch"),
                          ("watch", "the trigger's watch"), ("patch", "marks, pause on kill"),
                          ("delete", "on_kill_action, delete_on_finish")):  # fmt: skip
            rights.append(Right(r.group, r.plural, verb, why))
    rights += [
        Right("", "events", "list", "the job's Events in the task log"),
        Right("", "events", "watch", "the job's Events in the task log"),
        Right("", "pods", "get", "the replicas' state, a result"),
        Right("", "pods", "list", "the replicas"),
        Right("", "pods", "get", "the replicas' logs in the task log", "log"),
        Right("", "configmaps", "get", "the evidence a finished job left"),
    ]
    return rights


def review(namespace: str, right: Right) -> dict[str, Any]:
    attributes = {"namespace": namespace, "verb": right.verb, "group": right.group, "resource": right.resource}
    if right.subresource:
        attributes["subresource"] = right.subresource
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes}}  # fmt: skip


def run(hook: Any, namespace: str, kinds: list[str] | None = None) -> list[Check]:
    """Every check, in order; a failed one says what to do."""
    kinds = kinds or sorted(RESOURCES)
    checks = []
    try:
        version = hook._request("GET", "/version")
        checks.append(Check("the cluster", True, f"{hook.identity()} reaches Kubernetes {version.get('gitVersion', '?')}"))
    except Exception as exc:  # noqa: BLE001 - whatever it is, it is the answer
        return [Check("the cluster", False, str(exc))]
    for kind in kinds:
        r = resource_for(kind)
        try:
            hook._request("GET", job_path(r, namespace), query=[("limit", "1")])
            checks.append(Check(f"{r.plural}.{r.group}", True, f"installed, listable in {namespace}"))
        except NotFound:
            checks.append(Check(f"{r.plural}.{r.group}", False, "the CRD is not installed: `airflow-t9k crds | kubectl apply "
                                "--server-side -f -`, or the Helm chart (docs/install.md)"))  # fmt: skip
        except ApiError as exc:
            checks.append(Check(f"{r.plural}.{r.group}", False, exc.message))
    for right in needed(kinds):
        try:
            answer = hook._request("POST", SSAR, body=review(namespace, right))
            allowed = bool((answer.get("status") or {}).get("allowed"))
            detail = f"for {right.why}" if allowed else f"MISSING in {namespace}: needed for {right.why} (docs/install.md)"
            checks.append(Check(right.named(), allowed, detail))
        except ApiError as exc:
            checks.append(Check(right.named(), False, f"could not ask: {exc.message}"))
    return checks


def report(checks: list[Check]) -> str:
    width = max(len(c.what) for c in checks)
    lines = [f"{'ok' if c.ok else 'NO':2}  {c.what:{width}}  {c.detail}" for c in checks]
    bad = [c for c in checks if not c.ok]
    lines.append(f"{len(checks) - len(bad)} of {len(checks)} checks passed" + (": fix the NO lines" if bad else ""))
    return "\n".join(lines)
