"""What a plan asks the I/O layer to do. Plain data, compared in tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_t9k.api.paths import child_kind

Obj = dict[str, Any]


@dataclass(frozen=True)
class Create:
    """Create a child; an AlreadyExists answer means an earlier reconcile already did."""

    manifest: Obj

    @property
    def kind(self) -> str:
        return child_kind(self.manifest)

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


@dataclass(frozen=True)
class CreateSSHSecret:
    """Create a Secret holding a fresh SSH key pair (keys are random, so the I/O layer makes them)."""

    manifest: Obj

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


@dataclass(frozen=True)
class Delete:
    """Delete a child gracefully; NotFound means it is already gone."""

    kind: str
    name: str
    uid: str | None = None


@dataclass(frozen=True)
class DeleteJob:
    """Delete the job itself (``ttlSecondsAfterFinished`` passed: reconcile/steps/expire.py), with
    its uid as precondition; its children go by their owner references. NotFound means it is
    already gone, a failed precondition that the name is another job's now: left alone."""

    uid: str | None


@dataclass(frozen=True)
class Patch:
    """Merge-patch a child the controller keeps in step with the spec (a ConfigMap's data)."""

    kind: str
    name: str
    body: Obj


@dataclass(frozen=True)
class ReplaceStatus:
    """Write a child's status (a Kueue Workload's): ``body`` is the whole object, resourceVersion included."""

    kind: str
    name: str
    body: Obj


@dataclass(frozen=True)
class KeepEvidence:
    """Create a job's evidence ConfigMap (reconcile/evidence.py): ``manifest`` holds the summary;
    the I/O layer adds each pod's last ``lines`` log lines (``log_key``, at most ``log_bytes``) and
    the job's Events (``events_key``). One ConfigMap holds a stall's evidence (reconcile/stall.py)
    and the job's end's, under keys of their own: ``merge`` adds the keys to the job's own
    ConfigMap, which the pass observed, instead of creating it."""

    manifest: Obj
    pods: tuple[str, ...]
    lines: int
    log_key: str = "{pod}.log"
    events_key: str = "events.json"
    log_bytes: int = 16 * 1024  # reconcile/evidence.py MAX_LOG_BYTES
    merge: bool = False

    @property
    def kind(self) -> str:
        return "ConfigMap"

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


@dataclass(frozen=True)
class WriteSpec:
    """Replace the job itself (PUT with its cached resourceVersion): ``job`` is the job with its
    template merged in and recorded (reconcile/template.py). Nothing else happens in that pass.
    ``record`` (which template, at which resourceVersion) goes into the job's status right after
    the spec is written: what says the job is merged (kinds/templates.py merged_record)."""

    job: Obj
    record: Obj | None = None


@dataclass(frozen=True)
class Emit:
    """A Kubernetes Event on the job."""

    type: str  # Normal | Warning
    reason: str
    message: str


Action = Create | CreateSSHSecret | Delete | DeleteJob | Patch | ReplaceStatus | KeepEvidence | WriteSpec


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...] = ()
    status: Obj = field(default_factory=dict)
    events: tuple[Emit, ...] = ()
    requeue_after: float | None = None

    def creates(self, kind: str | None = None) -> list[str]:
        return [a.name for a in self.actions if isinstance(a, Create | CreateSSHSecret) and (kind is None or _kind(a) == kind)]

    def deletes(self, kind: str | None = None) -> list[str]:
        return [a.name for a in self.actions if isinstance(a, Delete) and (kind is None or a.kind == kind)]

    def patches(self) -> list[str]:
        return [a.name for a in self.actions if isinstance(a, Patch)]


def _kind(a: Create | CreateSSHSecret) -> str:
    return "Secret" if isinstance(a, CreateSSHSecret) else a.kind
