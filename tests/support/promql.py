"""Which metric names a dashboard's and an alert rule's PromQL read, and which names a controller
exposes: enough of PromQL to check one against the other, not a parser.

A metric name is an identifier that is not a function or aggregation (followed by ``(``), not a
keyword, not a label (inside ``{...}``, ``by (...)`` and the like), not in a string, a range
``[...]`` or a Grafana variable, and not a number or a duration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

KEYWORDS = frozenset({"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset",
                      "bool", "inf", "nan", "atan2"})  # fmt: skip
# Series Prometheus makes itself, about a scrape or an alert: no target exports them.
PROMETHEUS_MADE = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_series_added",
                             "scrape_samples_post_metric_relabeling", "ALERTS", "ALERTS_FOR_STATE"})  # fmt: skip
# Grafana's own query functions (variable queries), around a PromQL expression.
GRAFANA_QUERY = re.compile(r"^\s*(?:label_values|query_result)\((?P<expr>.*?)(?:,\s*[A-Za-z_]\w*)?\)\s*$", re.S)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\$\w+")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.I)
_TOKEN = re.compile(
    r"(?P<num>0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*)"
    r"|(?P<id>[A-Za-z_:][A-Za-z0-9_:]*)|(?P<other>\S)"
)


def _blank_brackets(expr: str, open_: str, close: str) -> str:
    """``expr`` with what each ``open_ ... close`` holds taken out (the brackets stay)."""
    out, depth = [], 0
    for ch in expr:
        if ch == open_:
            depth += 1
            if depth == 1:
                out.append(ch)
            continue
        if ch == close and depth:
            depth -= 1
            if depth == 0:
                out.append(ch)
            continue
        if not depth:
            out.append(ch)
    return "".join(out)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana variable query) reads."""
    m = GRAFANA_QUERY.match(expr)
    if m:
        expr = m.group("expr")
    expr = _STRING.sub('""', expr)
    expr = _GRAFANA_VAR.sub("", expr)
    expr = _blank_brackets(_blank_brackets(expr, "{", "}"), "[", "]")
    expr = _LABEL_LIST.sub(" ", expr)
    tokens = [(t.lastgroup, t.group()) for t in _TOKEN.finditer(expr)]
    names = set()
    for i, (kind, text) in enumerate(tokens):
        if kind != "id" or text.lower() in KEYWORDS:
            continue
        if i + 1 < len(tokens) and tokens[i + 1][1] == "(":
            continue  # a function or an aggregation
        names.add(text)
    return names


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, query) for every panel target's expr (rows' nested panels too) and variable query."""

    def panels(items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for p in items:
            yield p
            yield from panels(p.get("panels") or [])

    for p in panels(dashboard.get("panels") or []):
        for t in p.get("targets") or []:
            yield f"panel {p.get('title')!r} {t.get('refId')}", t["expr"]
    for var in (dashboard.get("templating") or {}).get("list") or []:
        if var.get("type") == "query":
            q = var.get("query")
            yield f"variable {var['name']}", q["query"] if isinstance(q, dict) else q


def rule_queries(groups: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    for g in groups:
        for r in g["rules"]:
            yield f"rule {r.get('alert') or r.get('record')}", r["expr"]


def exposed_names(families: Iterable[Any]) -> set[str]:
    """Every series name the families (``registry.collect()`` or a parsed scrape) expose, a
    family with no sample yet (labelled, never incremented) included, by its type's suffixes."""
    suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
                "gaugehistogram": ("_bucket", "_gsum", "_gcount"), "summary": ("", "_sum", "_count", "_created"),
                "info": ("_info",)}  # fmt: skip
    names: set[str] = set()
    for f in families:
        names.update(f.name + s for s in suffixes.get(f.type, ("",)))
        names.update(s.name for s in f.samples)
    return names
