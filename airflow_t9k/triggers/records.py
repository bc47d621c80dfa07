"""The trigger's arguments as four small records, stored as plain dicts.

A ``T9kJobTrigger`` lives in Airflow's database as its ``serialize()`` kwargs from the task's
deferral until its event, possibly across an upgrade of this package, in either direction: a
rolling upgrade runs new workers beside old triggerers, and the other way round. So the stored
shape is a contract: each record is written as a dict of primitives under its own key (``job``,
``connection``, ``policy``, ``forwarding``), with ``version`` (``VERSION``), and

- ``from_kwargs`` also reads the flat keyword arguments that versions before the records wrote
  (``kind=..., deadline=..., max_log_lines=...``), so a trigger deferred before an upgrade
  deserializes and runs the same after it;
- it ignores what it does not know (a field a newer worker added to a record, a record or key
  of its own, a higher ``version``), with a warning, so a row a newer worker wrote loads on an
  older triggerer and its task goes on, without what the newer version added.

No record holds credentials: the triggerer resolves them itself from the connection id, the
kubeconfig path, the context or in-cluster.
"""

from __future__ import annotations

import logging
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
    # Resume the task once when the job is predicted to miss its deadline (PredictedOverrun), for
    # the operator's on_predicted_overrun; the task then defers again with it off.
    overrun_callback: bool = False
    overrun_seen: str | None = None  # the turn of PredictedOverrun the task log has already (api/overrun.note's key)


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
    save_log_cursor: bool = True  # keep where the logs stand in XCom t9k_log_cursor (not with do_xcom_push=False)
    # (key, value): an XCom the trigger writes once, when it first sees the job Running, so a deferred
    # task shows it without a resume (TIJobOperator: ("ti_state", "Running")). None: nothing.
    running_xcom: tuple[str, str] | None = None


# 1: the four records (no key); 2: ``version`` written, unknown fields ignored; 3: Forwarding's
# running_xcom; 4: WaitPolicy's overrun_callback and overrun_seen. Raise it whenever a field is
# added, so an older triggerer can say which version wrote what it ignores.
VERSION = 4
VERSION_KEY = "version"
RECORDS: dict[str, type] = {"job": JobRef, "connection": Connection, "policy": WaitPolicy, "forwarding": Forwarding}
# Flat keyword arguments that earlier versions stored and that hold credentials: still read from
# an old row (the triggerer needs them to reach the cluster), never written by a new deferral.
LEGACY_CREDENTIALS = ("config_dict", "connection_extras")
_TUPLES = {"target_phases", "follow_pods", "running_xcom"}


def _field_names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


def _build(cls: type, values: Obj, notes: list[str]) -> Any:
    """A record from a dict (JSON lists back to tuples; an empty target list means none); fields
    it does not know (a newer version's) are left out and noted."""
    unknown = set(values) - _field_names(cls)
    if unknown:
        notes.append(f"{cls.__name__} fields {', '.join(sorted(unknown))}")
    clean = {k: v for k, v in values.items() if k not in unknown}
    for key in _TUPLES & set(clean):
        value = clean[key]
        clean[key] = tuple(value) if value is not None and (value or key == "follow_pods") else None
    return cls(**clean)


def to_dict(record: Any) -> Obj:
    """A record as JSON-ready primitives (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(record).items()}


def from_kwargs(kwargs: Obj) -> tuple[JobRef, Connection, WaitPolicy, Forwarding, Obj, list[str]]:
    """The records from a trigger's kwargs, new shape or old flat one (or a mix: a record given
    whole, the rest flat), any legacy credential kwargs as found, and what was ignored.

    A flat key lands in the record that has a field of its name. What no record knows (a
    field or key a newer version wrote) is ignored and named in the returned notes (``warn``
    logs them): an older triggerer runs a newer worker's trigger as far as it understands it."""
    kwargs = dict(kwargs)
    version = kwargs.pop(VERSION_KEY, None)
    given = {key: kwargs[key] for key in RECORDS if kwargs.get(key) is not None}
    legacy = {key: kwargs[key] for key in LEGACY_CREDENTIALS if kwargs.get(key)}
    flat = {k: v for k, v in kwargs.items() if k not in RECORDS and k not in LEGACY_CREDENTIALS}
    parts: dict[str, Obj] = {key: {} for key in RECORDS}
    notes: list[str] = []
    for key, value in flat.items():
        home = next((name for name, cls in RECORDS.items() if key in _field_names(cls)), None)
        if home is None:
            notes.append(f"key {key!r}")
            continue
        if home in given:
            raise TypeError(f"T9kJobTrigger got {key!r} both flat and inside {home!r}")
        parts[home][key] = value
    records: list[Any] = []
    for key, cls in RECORDS.items():
        value = given.get(key)
        if isinstance(value, cls):
            records.append(value)
        elif value is not None and not isinstance(value, dict):
            raise TypeError(f"T9kJobTrigger's {key!r} must be a {cls.__name__} or a dict, got {type(value).__name__}")
        else:
            records.append(_build(cls, value if value is not None else parts[key], notes))
    if notes or (isinstance(version, int) and version > VERSION):
        wrote = f"version {version}" if isinstance(version, int) else "another version"
        ignored = "; ".join(notes) or "nothing"
        notes = [f"written by {wrote} of airflow-t9k (this triggerer runs version {VERSION}); ignored: {ignored}"]
    job, connection, policy, forwarding = records
    return job, connection, policy, forwarding, legacy, notes


def warn(notes: list[str], log: logging.Logger | Any) -> None:
    for note in notes:
        log.warning("T9kJobTrigger %s; upgrade the triggerers to the workers' version (docs/airflow.md, Upgrades)", note)
