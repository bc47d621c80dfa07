"""Kubernetes label selectors, parsed and matched locally (pure).

Two users: the deferred sensor finds its job by labels among the objects the shared watch
already holds, without a LIST of its own; the controller's ``--namespace-selector`` picks the
namespaces it manages. Equality-based requirements and existence (``a=b``, ``a==b``, ``a!=b``,
``a``, ``!a``) and set-based ``in`` / ``notin`` (``env in (a, b)``), with keys and values
checked as the API server checks them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Labels = Mapping[str, str]
Requirement = Callable[[Labels], bool]


class SelectorError(ValueError):
    """A label selector the API server would refuse."""


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
            raise SelectorError(f"bad value in label selector requirement {text!r}")
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
    """A parsed label selector; ``matches(None)`` treats no labels as the empty set."""

    text: str
    requirements: tuple[Requirement, ...] = field(compare=False, repr=False)

    def matches(self, labels: Labels | None) -> bool:
        return all(r(labels or {}) for r in self.requirements)


def parse_selector(text: str) -> Selector:
    parts = _split(text.strip())
    if not text.strip() or any(not p for p in parts):
        raise SelectorError(f"empty requirement in label selector {text!r}")
    return Selector(text.strip(), tuple(_requirement(p) for p in parts))


def parse(selector: str) -> Callable[[Labels | None], bool]:
    """A predicate on an object's labels; SelectorError (a ValueError) for a bad selector."""
    return parse_selector(selector).matches
