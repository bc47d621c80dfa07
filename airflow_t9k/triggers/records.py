"""The trigger's arguments as four small records, stored as plain dicts.

A ``T9kJobTrigger`` lives in Airflow's database as its ``serialize()`` kwargs from the task's
deferral until its event, possibly across an upgrade of this package. So the stored shape is
a contract: each record is written as a dict of primitives under its own key (``job``,
``connection``, ``policy``, ``forwarding``), and ``from_kwargs`` also reads the flat keyword
arguments that versions before the records wrote (``kind=..., deadline=..., max_log_lines=...``),
so a trigger deferred before an upgrade deserializes and runs the same after it.

No record holds credentials: the triggerer resolves them itself from the connection id, the
kubeconfig path, the context or in-cluster.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from airflow_t9k.api.startup import DEFAULT_STARTUP_ERROR_GRACE

Obj = dict[str, Any]


@dataclass
class JobRef:
    """Which job: by name (and uid, when the task knows it), or by labels. Not frozen: a
    trigger given labels learns the name once the one job they name appears."""

    kind: str
    namespace: str
    name: str = ""
    uid: str | None = None  # a different object of the same name is reported as an error
    label_selector: str | None = None  # instead of ``name``: the one job with these labels


@dataclass(frozen=True)
class Connection:
    """Where the triggerer finds the cluster (it reads the connection or file itself)."""

    kubernetes_conn_id: str | None = "kubernetes_default"
    config_file: str | None = None  # a kubeconfig path readable on the triggerer
    cluster_context: str | None = None
    in_cluster: bool | None = None


@dataclass(frozen=True)
class WaitPolicy:
    """How long and for what to wait, and what a user's kill does."""

    deadline: str | None = None  # ISO time: then a ``timeout`` event (after one last read of the job)
    startup_timeout: float | None = None
    startup_error_grace: float | None = DEFAULT_STARTUP_ERROR_GRACE
    queue_timeout: float | None = None
    target_phases: tuple[str, ...] | None = None  # also end (``success``) at these phases: the sensor's
    wait_for_creation: bool = False  # a job that does not exist yet is waited for (the sensor)
    on_kill_action: str = "delete"  # delete, pause, keep, or none (the sensor: not its job)


@dataclass(frozen=True)
class Forwarding:
    """What reaches the task log while waiting and when the job failed, and how much."""

    log_events: bool = True
    max_forwarded: int = 200  # Kubernetes Events
    events_since: str | None = None  # ISO time; older Events and log lines are not forwarded
    stream_logs: bool = True
    max_log_lines: int = 1000  # streamed lines in all; and, apart from them, the failed replicas' lines
    max_followed_pods: int = 8  # replicas followed at once; and failed replicas whose logs are printed
    follow_pods: tuple[str, ...] | None = None  # None: every running replica
    log_tail_lines: int = 50  # lines of the first failed replica's log quoted in the event's message


RECORDS: dict[str, type] = {"job": JobRef, "connection": Connection, "policy": WaitPolicy, "forwarding": Forwarding}
# Flat keyword arguments that earlier versions stored and that hold credentials: still read from
# an old row (the triggerer needs them to reach the cluster), never written by a new deferral.
LEGACY_CREDENTIALS = ("config_dict", "connection_extras")
_TUPLES = {"target_phases", "follow_pods"}


def _field_names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


def _build(cls: type, values: Obj) -> Any:
    """A record from a dict (JSON lists back to tuples; an empty target list means none)."""
    unknown = set(values) - _field_names(cls)
    if unknown:
        raise TypeError(f"unexpected {cls.__name__} fields: {', '.join(sorted(unknown))}")
    clean = dict(values)
    for key in _TUPLES & set(clean):
        value = clean[key]
        clean[key] = tuple(value) if value is not None and (value or key == "follow_pods") else None
    return cls(**clean)


def to_dict(record: Any) -> Obj:
    """A record as JSON-ready primitives (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(record).items()}


def from_kwargs(kwargs: Obj) -> tuple[JobRef, Connection, WaitPolicy, Forwarding, Obj]:
    """The records from a trigger's kwargs, new shape or old flat one (or a mix: a record given
    whole, the rest flat), and any legacy credential kwargs as found.

    A flat key lands in the record that has a field of its name; a key no record knows is an
    error, as an unexpected keyword argument always was."""
    given = {key: kwargs[key] for key in RECORDS if kwargs.get(key) is not None}
    legacy = {key: kwargs[key] for key in LEGACY_CREDENTIALS if kwargs.get(key)}
    flat = {k: v for k, v in kwargs.items() if k not in RECORDS and k not in LEGACY_CREDENTIALS}
    parts: dict[str, Obj] = {key: {} for key in RECORDS}
    for key, value in flat.items():
        home = next((name for name, cls in RECORDS.items() if key in _field_names(cls)), None)
        if home is None:
            raise TypeError(f"T9kJobTrigger got an unexpected keyword argument {key!r}")
        if home in given:
            raise TypeError(f"T9kJobTrigger got {key!r} both flat and inside {home!r}")
        parts[home][key] = value
    records: list[Any] = []
    for key, cls in RECORDS.items():
        value = given.get(key)
        records.append(value if isinstance(value, cls) else _build(cls, value if value is not None else parts[key]))
    job, connection, policy, forwarding = records
    return job, connection, policy, forwarding, legacy
