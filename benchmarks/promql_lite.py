"""Just enough PromQL to draw the chart's Grafana dashboard from recorded scrapes, with no
Prometheus at hand (dashboard_picture.py): selectors with label matchers and ranges, rate,
increase, histogram_quantile, vector, the aggregations sum/max/min/avg/count by (...), the
arithmetic and comparison operators between vectors and numbers (one-to-one on all labels), and
``or``/``and``. Not Prometheus: rate and increase extrapolate over the window but do not mimic
its edge cases; lookback is the last scrape of each target.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Labels = tuple[tuple[str, str], ...]  # sorted, without __name__
Vector = dict[Labels, float]
# One scrape of one target: its time and its samples by metric name.
Scrape = tuple[float, dict[str, list[tuple[Labels, float]]]]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?P<unit>ms|[smhdwy])?(?![A-Za-z_])"
    r"|(?P<str>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
    r"|(?P<id>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"|(?P<op>==|!=|>=|<=|=~|!~|[-+*/%^(){}\[\],=<>]))"
)
SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
AGGREGATIONS = ("sum", "max", "min", "avg", "count")
PRECEDENCE = {"or": 1, "and": 2, "unless": 2, "==": 3, "!=": 3, ">": 3, "<": 3, ">=": 3, "<=": 3,
              "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}  # fmt: skip


class Unsupported(ValueError):
    """PromQL this module does not evaluate."""


@dataclass
class Node:
    op: str  # num, sel, call, agg, bin, neg
    args: tuple[Any, ...]


def tokens(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise Unsupported(f"cannot read {expr[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup if m.lastgroup != "unit" else "num"
        if m.group("num") is not None:
            value = float(m.group("num")) * (SECONDS[m.group("unit")] if m.group("unit") else 1)
            out.append(("dur" if m.group("unit") else "num", repr(value)))
        else:
            out.append((str(kind), m.group(kind)))
    return out


class Parser:
    def __init__(self, expr: str) -> None:
        self.toks = tokens(expr)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise Unsupported("unexpected end")
        tok = self.toks[self.i]
        if want is not None and tok[1] != want:
            raise Unsupported(f"expected {want!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.expr(0)
        if self.peek() is not None:
            raise Unsupported(f"left over: {self.peek()!r}")
        return node

    def expr(self, min_prec: int) -> Node:
        left = self.unary()
        while (op := self.peek()) in PRECEDENCE and PRECEDENCE[op] > min_prec:
            self.take()
            as_bool = self.peek() == "bool"
            if as_bool:
                self.take()
            if self.peek() in ("on", "ignoring", "group_left", "group_right"):
                raise Unsupported("vector matching modifiers")
            left = Node("bin", (op, left, self.expr(PRECEDENCE[op]), as_bool))
        return left

    def unary(self) -> Node:
        if self.peek() == "-":
            self.take()
            return Node("neg", (self.unary(),))
        return self.primary()

    def labels_list(self) -> tuple[str, ...]:
        self.take("(")
        names: list[str] = []
        while self.peek() != ")":
            names.append(self.take()[1])
            if self.peek() == ",":
                self.take()
        self.take(")")
        return tuple(names)

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            return Node("num", (float(text),))
        if text == "(":
            node = self.expr(0)
            self.take(")")
            return node
        if kind == "id" and text.lower() in ("inf", "nan"):
            return Node("num", (float(text),))
        if kind == "id" and text in AGGREGATIONS:
            by = self.labels_list() if self.peek() == "by" and self.take() else None
            self.take("(")
            inner = self.expr(0)
            self.take(")")
            if by is None and self.peek() == "by":
                self.take()
                by = self.labels_list()
            return Node("agg", (text, by or (), inner))
        if kind == "id" and self.peek() == "(":
            self.take("(")
            args = [self.expr(0)]
            while self.peek() == ",":
                self.take()
                args.append(self.expr(0))
            self.take(")")
            return Node("call", (text, *args))
        if kind == "id" or text == "{":
            name = text if kind == "id" else None
            if kind == "id" and self.peek() == "{":
                self.take("{")
            matchers: list[tuple[str, str, str]] = []
            if kind != "id" or self.toks[self.i - 1][1] == "{":
                while self.peek() != "}":
                    label = self.take()[1]
                    op = self.take()[1]
                    value = self.take()[1]
                    matchers.append((label, op, bytes(value[1:-1], "utf-8").decode("unicode_escape")))
                    if self.peek() == ",":
                        self.take()
                self.take("}")
            window = None
            if self.peek() == "[":
                self.take("[")
                kind2, dur = self.take()
                if kind2 != "dur":
                    raise Unsupported(f"range {dur!r}")
                if (self.peek() or "").startswith(":"):
                    raise Unsupported("subqueries")
                self.take("]")
                window = float(dur)
            return Node("sel", (name, tuple(matchers), window))
        raise Unsupported(f"unexpected {text!r}")


def _matches(labels: dict[str, str], matchers: tuple[tuple[str, str, str], ...]) -> bool:
    for label, op, value in matchers:
        have = labels.get(label, "")
        ok = {"=": have == value, "!=": have != value, "=~": re.fullmatch(value, have) is not None,
              "!~": re.fullmatch(value, have) is None}[op]  # fmt: skip
        if not ok:
            return False
    return True


class Evaluator:
    """Evaluates expressions at a time over scrapes, per target: ``targets[i]`` is a list of
    ``Scrape`` in time order."""

    def __init__(self, targets: list[list[Scrape]]) -> None:
        self.targets = targets
        self.times = [[when for when, _ in scrapes] for scrapes in targets]
        self.parsed: dict[str, Node] = {}

    def at(self, expr: str, t: float) -> Vector | float:
        node = self.parsed.get(expr)
        if node is None:
            node = self.parsed[expr] = Parser(expr).parse()
        return self.eval(node, t)

    def _select(self, name: str | None, matchers: Any, t: float, window: float | None) -> dict[Labels, list[tuple[float, float]]]:
        if name is None:
            raise Unsupported("a selector without a metric name")
        out: dict[Labels, list[tuple[float, float]]] = {}
        for scrapes, times in zip(self.targets, self.times, strict=True):
            end = bisect.bisect_right(times, t)
            start = bisect.bisect_right(times, t - window) if window is not None else max(end - 1, 0)
            for when, samples in scrapes[start:end]:
                for labels, value in samples.get(name, ()):
                    if _matches(dict(labels), matchers):
                        out.setdefault(labels, []).append((when, value))
        return out

    def eval(self, node: Node, t: float) -> Vector | float:
        op, args = node.op, node.args
        if op == "num":
            return float(args[0])
        if op == "neg":
            inner = self.eval(args[0], t)
            return -inner if isinstance(inner, float) else {k: -v for k, v in inner.items()}
        if op == "sel":
            name, matchers, window = args
            if window is not None:
                raise Unsupported("a range vector outside rate or increase")
            return {k: v[-1][1] for k, v in self._select(name, matchers, t, None).items()}
        if op == "call":
            return self._call(args[0], args[1:], t)
        if op == "agg":
            return self._aggregate(args[0], args[1], self.eval(args[2], t))
        return self._binary(args[0], self.eval(args[1], t), self.eval(args[2], t), args[3])

    def _call(self, fn: str, args: tuple[Node, ...], t: float) -> Vector | float:
        if fn in ("rate", "increase"):
            sel = args[0]
            if sel.op != "sel" or sel.args[2] is None:
                raise Unsupported(f"{fn} of something else than a range selector")
            window = sel.args[2]
            out: Vector = {}
            for labels, points in self._select(sel.args[0], sel.args[1], t, window).items():
                if len(points) < 2:
                    continue
                delta = sum(b - a if b >= a else b for (_, a), (_, b) in zip(points, points[1:], strict=False))  # resets
                span = points[-1][0] - points[0][0]
                if span <= 0:
                    continue
                out[_drop_name(labels)] = delta / span if fn == "rate" else delta * window / span
            return out
        if fn == "vector":
            value = self.eval(args[0], t)
            return {(): value} if isinstance(value, float) else value
        if fn == "histogram_quantile":
            q = self.eval(args[0], t)
            buckets = self.eval(args[1], t)
            if not isinstance(q, float) or isinstance(buckets, float):
                raise Unsupported("histogram_quantile(scalar, vector)")
            return _quantile(q, buckets)
        raise Unsupported(f"function {fn}")

    @staticmethod
    def _aggregate(fn: str, by: tuple[str, ...], vec: Vector | float) -> Vector:
        if isinstance(vec, float):
            raise Unsupported(f"{fn} of a scalar")
        groups: dict[Labels, list[float]] = {}
        for labels, value in vec.items():
            key = tuple((k, v) for k, v in labels if k in by)
            groups.setdefault(key, []).append(value)
        pick: dict[str, Callable[[list[float]], float]] = {"sum": sum, "max": max, "min": min,
                                                          "avg": lambda v: sum(v) / len(v), "count": len}  # fmt: skip
        return {k: float(pick[fn](v)) for k, v in groups.items()}

    @staticmethod
    def _binary(op: str, left: Vector | float, right: Vector | float, as_bool: bool) -> Vector | float:
        if op in ("or", "and", "unless"):
            if isinstance(left, float) or isinstance(right, float):
                raise Unsupported(f"{op} between scalars")
            if op == "or":
                return {**right, **left}
            return {k: v for k, v in left.items() if (k in right) == (op == "and")}
        fn = _ARITH[op]
        if isinstance(left, float) and isinstance(right, float):
            return float(fn(left, right))
        if isinstance(left, float) or isinstance(right, float):
            vec, scalar, vec_left = (right, left, False) if isinstance(left, float) else (left, right, True)
            assert isinstance(scalar, float)
            assert not isinstance(vec, float)
            out = {}
            for k, v in vec.items():
                result = fn(v, scalar) if vec_left else fn(scalar, v)
                if op in _COMPARE and not as_bool:
                    if result:
                        out[k] = v
                else:
                    out[_drop_name(k)] = float(result)
            return out
        out = {}
        for k, v in left.items():
            if k in right:
                result = fn(v, right[k])
                if op in _COMPARE and not as_bool:
                    if result:
                        out[k] = v
                else:
                    out[k] = float(result)
        return out


_COMPARE = ("==", "!=", ">", "<", ">=", "<=")
_ARITH: dict[str, Callable[[float, float], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b if b else (math.nan if a == 0 else math.copysign(math.inf, a)),
    "%": lambda a, b: math.fmod(a, b) if b else math.nan, "^": lambda a, b: a**b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b,
}  # fmt: skip


def _drop_name(labels: Labels) -> Labels:
    return tuple((k, v) for k, v in labels if k != "__name__")


def _quantile(q: float, buckets: Vector) -> Vector:
    """Prometheus' histogram_quantile: linear within the bucket the rank falls in."""
    by: dict[Labels, list[tuple[float, float]]] = {}
    for labels, count in buckets.items():
        le = dict(labels).get("le")
        if le is None:
            continue
        by.setdefault(tuple((k, v) for k, v in labels if k != "le"), []).append((float(le), count))
    out: Vector = {}
    for labels, points in by.items():
        points.sort()
        total = points[-1][1]
        if total <= 0 or points[-1][0] != math.inf:
            continue
        rank, lower, below = q * total, 0.0, 0.0
        for upper, count in points:
            if count >= rank:
                if upper == math.inf:
                    out[labels] = points[-2][0] if len(points) > 1 else math.nan
                elif count == below:
                    out[labels] = upper
                else:
                    out[labels] = lower + (upper - lower) * (rank - below) / (count - below)
                break
            lower, below = upper, count
    return out
