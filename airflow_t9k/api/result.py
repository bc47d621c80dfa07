"""A job's result: the termination message of the replica that decides it.

A training script writes its result (a metric, a model URI) to ``/dev/termination-log``;
the kubelet keeps up to 4 KB of it in the container's ``state.terminated.message``. No
sidecar and no shared volume: the pod's status carries it.
"""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]
LIMIT_BYTES = 4096  # the kubelet's cap on a termination message


def parse_source(result_from: str) -> tuple[str, int, str | None]:
    """``"<type>"``, ``"<type>:<rank>"``, optionally ``"/<container>"``: (type, rank, container)."""
    replica, _, container = result_from.partition("/")
    rtype, _, rank = replica.partition(":")
    if not rtype or (rank and not rank.isdigit()):
        raise ValueError(f"result_from must look like 'worker', 'worker:1' or 'worker:1/main', got {result_from!r}")
    return rtype, int(rank or 0), container or None


def message_of(pod: Obj | None, container: str | None = None, prefer: str | None = None) -> str | None:
    """The termination message of ``container`` (else of ``prefer``, else of the first container
    that left one); None when there is none."""
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []

    def message(cs: Obj) -> str | None:
        return ((cs.get("state") or {}).get("terminated") or {}).get("message") or None

    by_name = {cs.get("name"): cs for cs in statuses}
    if container is not None:
        return message(by_name[container]) if container in by_name else None
    if prefer in by_name and message(by_name[prefer]) is not None:
        return message(by_name[prefer])
    return next((m for cs in statuses if (m := message(cs)) is not None), None)


def parse(text: str | None) -> Any:
    """JSON when the message is JSON, else the text with its trailing newline removed."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text.rstrip("\n")
