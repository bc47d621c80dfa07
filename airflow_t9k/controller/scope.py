"""Which namespaces the controller reconciles jobs in (pure; no client).

Creating a T9k job is creating pods: the controller copies the job's pod template into its
pods. Were it to act in ``kube-system``, anyone allowed to create a job anywhere would get
pods there, next to the cluster's own service accounts and rarely under Pod Security. So by
default it reconciles every namespace but the cluster's own three and the controller's own,
and ``--namespace-selector`` (a label selector on Namespaces, as Kueue's
``managedJobsNamespaceSelector``) narrows that further. A job elsewhere gets no pod; the
runner says why on the job, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
NOT_MANAGED = "NamespaceNotManaged"  # the condition type and Event reason on a job left alone

Labels = dict[str, str]
Requirement = Callable[[Labels], bool]


class SelectorError(ValueError):
    """A label selector this parser does not understand (the controller refuses to start)."""


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQ = re.compile(rf"^(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})$")
_EXISTS = re.compile(rf"^(?P<neg>!?)\s*(?P<key>{_KEY})$")


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b`` is two requirements)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts]


def _requirement(text: str) -> Requirement:
    if m := _SET.match(text):
        key, values = m["key"], {v.strip() for v in m["values"].split(",")}
        if not all(re.fullmatch(_VALUE, v) for v in values):
            raise SelectorError(f"bad value in {text!r}")
        if m["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQ.match(text):
        key, value = m["key"], m["value"]
        if m["op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS.match(text):
        key = m["key"]
        if m["neg"]:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"cannot parse label selector requirement {text!r}")


@dataclass(frozen=True)
class Selector:
    """A Kubernetes label selector (equality- and set-based), matched against labels."""

    text: str
    requirements: tuple[Requirement, ...] = field(compare=False, repr=False)

    def matches(self, labels: Labels) -> bool:
        return all(r(labels) for r in self.requirements)


def parse_selector(text: str) -> Selector:
    parts = _split(text.strip())
    if not text.strip() or any(not p for p in parts):
        raise SelectorError(f"empty requirement in label selector {text!r}")
    return Selector(text.strip(), tuple(_requirement(p) for p in parts))


@dataclass(frozen=True)
class Scope:
    """``own``: the controller's own namespace (None when not run in a pod)."""

    own: str | None = None
    selector: Selector | None = None

    def excluded(self) -> tuple[str, ...]:
        return SYSTEM_NAMESPACES + ((self.own,) if self.own else ())

    def why_not(self, namespace: str, labels: Labels | None) -> str | None:
        """None when jobs in ``namespace`` are reconciled, else why they are not.

        ``labels`` are the namespace's (None: not known, which with a selector means not
        managed: a namespace the controller cannot see is not one it was told to manage).
        """
        if namespace in SYSTEM_NAMESPACES:
            return f"namespace {namespace} is the cluster's own; the controller never creates pods there"
        if self.own and namespace == self.own:
            return f"namespace {namespace} is the controller's own; the controller never creates pods there"
        if self.selector is not None and (labels is None or not self.selector.matches(labels)):
            return (f"namespace {namespace} does not match the controller's --namespace-selector "
                    f"{self.selector.text!r}")  # fmt: skip
        return None
