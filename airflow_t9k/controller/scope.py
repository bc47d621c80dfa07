"""Which namespaces the controller reconciles jobs in (pure; no client).

Creating a T9k job is creating pods: the controller copies the job's pod template into its
pods. Were it to act in ``kube-system``, anyone allowed to create a job anywhere would get
pods there, next to the cluster's own service accounts and rarely under Pod Security. So by
default it reconciles every namespace but the cluster's own three and the controller's own;
``--exclude-namespace`` (repeatable) adds more, such as Airflow's own (its fernet key,
metadata database credentials and JWT secret are Secrets a job's pod could mount), and
``--namespace-selector`` (a label selector on Namespaces, as Kueue's
``managedJobsNamespaceSelector``; the Helm chart's default is the opt-in
``airflow-t9k.io/jobs=enabled``) narrows that further. A job elsewhere gets no pod; the runner
says why on the job, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

# cli and tests import them from here: re-exported.
from airflow_t9k.api.selector import SelectorError as SelectorError
from airflow_t9k.api.selector import parse_selector as parse_selector

if TYPE_CHECKING:
    from airflow_t9k.api.selector import Selector

SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
NOT_MANAGED = "NamespaceNotManaged"  # the condition type and Event reason on a job left alone

Labels = dict[str, str]


@dataclass(frozen=True)
class Scope:
    """``own``: the controller's own namespace (None when not run in a pod)."""

    own: str | None = None
    selector: Selector | None = None
    exclude: frozenset[str] = frozenset()  # --exclude-namespace

    def excluded(self) -> tuple[str, ...]:
        return SYSTEM_NAMESPACES + ((self.own,) if self.own else ()) + tuple(sorted(self.exclude - {self.own}))

    def why_not(self, namespace: str, labels: Labels | None) -> str | None:
        """None when jobs in ``namespace`` are reconciled, else why they are not.

        ``labels`` are the namespace's (None: not known, which with a selector means not
        managed: a namespace the controller cannot see is not one it was told to manage).
        """
        if namespace in SYSTEM_NAMESPACES:
            return f"namespace {namespace} is the cluster's own; the controller never creates pods there"
        if self.own and namespace == self.own:
            return f"namespace {namespace} is the controller's own; the controller never creates pods there"
        if namespace in self.exclude:
            return f"namespace {namespace} is excluded (--exclude-namespace); the controller never creates pods there"
        if self.selector is not None and (labels is None or not self.selector.matches(labels)):
            return (f"namespace {namespace} does not match the controller's --namespace-selector "
                    f"{self.selector.text!r}")  # fmt: skip
        return None
