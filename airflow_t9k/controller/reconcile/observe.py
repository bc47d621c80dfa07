"""What the I/O layer saw of a job's children, keyed by name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True)
class Observed:
    pods: Mapping[str, Obj] = field(default_factory=dict)
    services: Mapping[str, Obj] = field(default_factory=dict)
    configmaps: Mapping[str, Obj] = field(default_factory=dict)
    secrets: Mapping[str, Obj] = field(default_factory=dict)

    @classmethod
    def of(cls, *objects: Obj) -> Observed:
        """Build from a flat list of objects (convenient in tests and in the cache)."""
        by_kind: dict[str, dict[str, Obj]] = {"Pod": {}, "Service": {}, "ConfigMap": {}, "Secret": {}}
        for o in objects:
            by_kind[o["kind"]][o["metadata"]["name"]] = o
        return cls(by_kind["Pod"], by_kind["Service"], by_kind["ConfigMap"], by_kind["Secret"])


def is_deleting(obj: Obj) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")
