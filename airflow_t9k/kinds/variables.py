"""GenericJob variable substitution (seed 001, "变量替换").

Five variables are ours: ``$(type)``, ``$(rank)``, ``$(replicas[T])``,
``$(service.T[R].host)`` and ``$(service.port[NAME])``. Kubernetes itself expands
``$(ENV_NAME)`` in command, args and env, so any other ``$(IDENTIFIER)`` is left for it,
and ``$$(...)`` stays an escape. Something that starts like one of ours but does not
parse, or names a type, rank or port that does not exist, is an error rather than a
silently unexpanded string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_t9k.kinds.base import InvalidSpec

_TOKEN = re.compile(r"\$\$|\$\(([^)]*)\)")
_OURS = re.compile(r"^(type|rank|replicas|service)\b")
_REPLICAS = re.compile(r"^replicas\[([^\]]+)\]$")
_HOST = re.compile(r"^service\.([^\[\]]+)\[(\d+)\]\.host$")
_PORT = re.compile(r"^service\.port\[([^\]]+)\]$")
_UNTERMINATED = re.compile(r"\$\((type|rank|replicas|service)[^)]*$")


@dataclass(frozen=True)
class Context:
    job_name: str
    rtype: str
    rank: int
    replicas: dict[str, int]
    ports: dict[str, int] | None  # None: spec.service is not set

    def host(self, rtype: str, rank: int) -> str:
        return f"{self.job_name}-{rtype}-{rank}"


def _resolve(expr: str, ctx: Context, where: str) -> str:
    if expr == "type":
        return ctx.rtype
    if expr == "rank":
        return str(ctx.rank)
    if m := _REPLICAS.match(expr):
        t = m.group(1)
        if t not in ctx.replicas:
            raise InvalidSpec(f"{where}: $({expr}) names replica type {t!r}, which is not in replicaSpecs")
        return str(ctx.replicas[t])
    if m := _HOST.match(expr):
        t, r = m.group(1), int(m.group(2))
        _need_service(expr, ctx, where)
        if t not in ctx.replicas:
            raise InvalidSpec(f"{where}: $({expr}) names replica type {t!r}, which is not in replicaSpecs")
        if r >= ctx.replicas[t]:
            raise InvalidSpec(f"{where}: $({expr}) names rank {r}, but {t} has {ctx.replicas[t]} replica(s)")
        return ctx.host(t, r)
    if m := _PORT.match(expr):
        ports = _need_service(expr, ctx, where)
        name = m.group(1)
        if name not in ports:
            raise InvalidSpec(f"{where}: $({expr}) names port {name!r}, not in spec.service.ports ({', '.join(ports)})")
        return str(ports[name])
    raise InvalidSpec(
        f"{where}: $({expr}) is not a valid variable; use $(type), $(rank), $(replicas[TYPE]), "
        "$(service.TYPE[RANK].host) or $(service.port[NAME])"
    )


def _need_service(expr: str, ctx: Context, where: str) -> dict[str, int]:
    if ctx.ports is None:
        raise InvalidSpec(f"{where}: $({expr}) needs spec.service, which is not set")
    return ctx.ports


def substitute(text: str, ctx: Context, where: str) -> str:
    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$$"
        expr = m.group(1).strip()
        if not _OURS.match(expr):
            return m.group(0)
        return _resolve(expr, ctx, where)

    if m := _UNTERMINATED.search(text):
        raise InvalidSpec(f"{where}: {m.group(0)!r} is missing its closing parenthesis")
    return _TOKEN.sub(repl, text)


def substitute_container(container: dict[str, Any], ctx: Context, where: str) -> None:
    """Expand variables in a container's command, args and env values, in place."""
    for key in ("command", "args"):
        if container.get(key):
            container[key] = [substitute(str(v), ctx, f"{where}.{key}") for v in container[key]]
    for env in container.get("env") or []:
        if isinstance(env.get("value"), str):
            env["value"] = substitute(env["value"], ctx, f"{where}.env[{env.get('name')}]")
