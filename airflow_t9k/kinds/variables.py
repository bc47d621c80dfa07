"""GenericJob variable substitution (seed 001, "变量替换").

Exactly five forms are ours: ``$(type)``, ``$(rank)``, ``$(replicas[T])``,
``$(service.T[R].host)`` and ``$(service.port[NAME])`` (spaces inside the parentheses are
allowed). Everything else that starts with ``$(`` is left as written: ``$(ENV_NAME)`` is
Kubernetes' own expansion, and ``$(type -P python3)`` or ``$(($(rank)+1))`` are the shell's.
``$$`` stays an escape. One of our forms that names a type, rank or port that does not exist
is an error rather than a silently wrong string.

One regular expression scans the text once; none of its classes can cross a ``$``, so a
long value without any of our forms costs linear time (a 112 KB env value once took 17 s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_t9k.kinds.base import InvalidSpec

_NAME = r"[^\s$()\[\]]+"
_TOKEN = re.compile(
    r"\$\$"
    r"|\$\(\s*(?:"
    r"(?P<plain>type|rank)"
    rf"|replicas\[(?P<replicas>{_NAME})\]"
    rf"|service\.port\[(?P<port>{_NAME})\]"
    rf"|service\.(?P<host>[^\s$()\[\].]+)\[(?P<rank>\d+)\]\.host"
    r")\s*\)"
)


@dataclass(frozen=True)
class Context:
    job_name: str
    rtype: str
    rank: int
    replicas: dict[str, int]
    ports: dict[str, int]  # spec.service.ports by name; empty when none are given

    def host(self, rtype: str, rank: int) -> str:
        return f"{self.job_name}-{rtype}-{rank}"


def _resolve(m: re.Match[str], ctx: Context, where: str) -> str:
    text = m.group(0)
    if text == "$$":
        return text
    if plain := m.group("plain"):
        return ctx.rtype if plain == "type" else str(ctx.rank)
    if (t := m.group("replicas")) is not None:
        _need_type(text, t, ctx, where)
        return str(ctx.replicas[t])
    if (name := m.group("port")) is not None:
        if name not in ctx.ports:
            have = f"spec.service.ports has {', '.join(ctx.ports)}" if ctx.ports else "spec.service.ports declares none"
            raise InvalidSpec(f"{where}: {text} names port {name!r}, but {have}")
        return str(ctx.ports[name])
    t, r = m.group("host"), int(m.group("rank"))
    _need_type(text, t, ctx, where)
    if r >= ctx.replicas[t]:
        raise InvalidSpec(f"{where}: {text} names rank {r}, but {t} has {ctx.replicas[t]} replica(s)")
    return ctx.host(t, r)


def _need_type(text: str, rtype: str, ctx: Context, where: str) -> None:
    if rtype not in ctx.replicas:
        raise InvalidSpec(
            f"{where}: {text} names replica type {rtype!r}, which is not in replicaSpecs ({', '.join(ctx.replicas)})"
        )


def substitute(text: str, ctx: Context, where: str) -> str:
    return _TOKEN.sub(lambda m: _resolve(m, ctx, where), text)


def substitute_container(container: dict[str, Any], ctx: Context, where: str) -> None:
    """Expand variables in a container's command, args and env values, in place."""
    for key in ("command", "args"):
        if container.get(key):
            container[key] = [substitute(str(v), ctx, f"{where}.{key}") for v in container[key]]
    for env in container.get("env") or []:
        if isinstance(env.get("value"), str):
            env["value"] = substitute(env["value"], ctx, f"{where}.env[{env.get('name')}]")


def referenced_ports(containers: list[dict[str, Any]]) -> list[str]:
    """Port names that ``$(service.port[NAME])`` uses in these containers, in first-use order."""
    names: list[str] = []
    for c in containers:
        texts = [str(v) for key in ("command", "args") for v in c.get(key) or []]
        texts += [e["value"] for e in c.get("env") or [] if isinstance(e, dict) and isinstance(e.get("value"), str)]
        for text in texts:
            for m in _TOKEN.finditer(text):
                if m.group("port") is not None and m.group("port") not in names:
                    names.append(m.group("port"))
    return names
