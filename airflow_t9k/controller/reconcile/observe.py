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
    jobs: Mapping[str, Obj] = field(default_factory=dict)  # batch/v1 Jobs (BeamJob's submit job)

    @classmethod
    def of(cls, *objects: Obj) -> Observed:
        """Build from a flat list of objects (convenient in tests and in the cache)."""
        by_kind: dict[str, dict[str, Obj]] = {"Pod": {}, "Service": {}, "ConfigMap": {}, "Secret": {}, "Job": {}}
        for o in objects:
            by_kind[o["kind"]][o["metadata"]["name"]] = o
        return cls(by_kind["Pod"], by_kind["Service"], by_kind["ConfigMap"], by_kind["Secret"], by_kind["Job"])

    def of_kind(self, kind: str) -> Mapping[str, Obj]:
        return {"Pod": self.pods, "Service": self.services, "ConfigMap": self.configmaps, "Secret": self.secrets, "Job": self.jobs}[kind]


def is_deleting(obj: Obj) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")
