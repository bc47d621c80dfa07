"""Kubernetes label selectors, matched locally: the deferred sensor finds its job by labels
among the objects the shared watch already holds, without a LIST of its own.

Equality-based requirements and existence (``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``) and
set-based ``in`` / ``notin`` (``env in (a, b)``), as the API server reads them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Requirement = Callable[[Mapping[str, str]], bool]
_SET = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def _split(selector: str) -> list[str]:
    """Split on the commas that separate requirements, not those inside ``in (a, b)``."""
    parts, depth, current = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def _requirement(text: str) -> Requirement:
    m = _SET.match(text)
    if m:
        key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _EQ.match(text)
    if m:
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    m = _EXISTS.match(text)
    if m:
        negate, key = m.groups()
        return (lambda labels: key not in labels) if negate else (lambda labels: key in labels)
    raise ValueError(f"cannot read the label selector requirement {text.strip()!r}")


def parse(selector: str) -> Callable[[Mapping[str, str] | None], bool]:
    """A predicate on an object's labels; ValueError for a selector the API server would refuse."""
    requirements = [_requirement(part) for part in _split(selector)]
    return lambda labels: all(r(labels or {}) for r in requirements)
