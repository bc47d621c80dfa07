"""T9kJobTrigger's contract: serialize() round-trips with primitive kwargs only, and carries
no credentials: the triggerer resolves them itself from the connection id or kubeconfig path."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone

import pytest

from airflow_t9k.triggers.job import T9kJobTrigger

# The stored shape: four records, each a dict of primitives (airflow_t9k.triggers.records).
KWARGS = {
    "job": {"kind": "PyTorchTrainingJob", "namespace": "ml", "name": "train-0123456789", "uid": "uid-1", "label_selector": None},
    "connection": {"kubernetes_conn_id": "k8s", "config_file": "/etc/airflow/kubeconfig", "cluster_context": "ctx",
                   "in_cluster": False},
    "policy": {"deadline": "2026-11-25T12:00:00+00:00", "startup_timeout": 300.0, "startup_error_grace": 120.0,
               "queue_timeout": None, "target_phases": ["Running"], "wait_for_creation": False, "on_kill_action": "pause",
               "overrun_callback": False, "overrun_seen": None},
    "forwarding": {"log_events": True, "max_forwarded": 100, "events_since": "2026-11-25T11:00:00+00:00", "stream_logs": True,
                   "max_log_lines": 500, "max_followed_pods": 4, "follow_pods": None, "log_tail_lines": 20,
                   "save_log_cursor": True, "running_xcom": None},
}  # fmt: skip

# The same trigger as the version before the records stored it: one flat kwarg per argument,
# optional ones left out at their defaults.
OLD_FLAT = {
    "kind": "PyTorchTrainingJob", "name": "train-0123456789", "namespace": "ml", "uid": "uid-1",
    "kubernetes_conn_id": "k8s", "config_file": "/etc/airflow/kubeconfig", "cluster_context": "ctx", "in_cluster": False,
    "deadline": "2026-11-25T12:00:00+00:00", "log_events": True, "max_forwarded": 100, "log_tail_lines": 20,
    "on_kill_action": "pause", "events_since": "2026-11-25T11:00:00+00:00", "stream_logs": True, "max_log_lines": 500,
    "max_followed_pods": 4, "startup_timeout": 300.0, "target_phases": ["Running"],
}  # fmt: skip


def test_serialize_returns_the_classpath_and_exact_kwargs():
    classpath, kwargs = T9kJobTrigger(**KWARGS).serialize()
    assert classpath == "airflow_t9k.triggers.job.T9kJobTrigger"
    assert kwargs == {"version": 4, **KWARGS}  # a row of the records' first version (no key) loads as it is


def test_serialize_round_trips_through_json():
    classpath, kwargs = T9kJobTrigger(**KWARGS).serialize()
    again = T9kJobTrigger(**json.loads(json.dumps(kwargs)))
    assert again.serialize() == (classpath, kwargs)


def test_the_operator_stores_records_only():
    from airflow.sdk import DAG

    from airflow_t9k.operators.kinds import GenericJobOperator

    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = GenericJobOperator(task_id="t", image="i", namespace="ml", deferrable=True, timeout=60)
    kwargs = op._trigger({"kind": "GenericJob", "name": "n", "namespace": "ml", "uid": "u"}, 1_800_000_000.0).serialize()[1]
    assert sorted(kwargs) == ["connection", "forwarding", "job", "policy", "version"]
    assert all(isinstance(v, dict) for k, v in kwargs.items() if k != "version")
    assert kwargs["policy"]["deadline"] == "2027-01-15T08:00:00+00:00"


def _old(**changes):
    return {k: v for k, v in {**OLD_FLAT, **changes}.items() if v is not ...}


# A trigger row written before an upgrade: (its flat kwargs, what the records must then hold).
OLD_ROWS = [
    pytest.param(OLD_FLAT, {}, id="previous-version"),
    pytest.param(_old(queue_timeout=600.0, startup_error_grace=30.0, follow_pods=["train-0123456789-master-0"]),
                 {"policy": {"queue_timeout": 600.0, "startup_error_grace": 30.0},
                  "forwarding": {"follow_pods": ["train-0123456789-master-0"]}}, id="optional-keys-written"),
    pytest.param(_old(startup_error_grace=None), {"policy": {"startup_error_grace": None}}, id="grace-off"),
    # Older still: before log streaming, startup_timeout, target_phases and the kubeconfig path.
    pytest.param(_old(stream_logs=..., max_log_lines=..., max_followed_pods=..., startup_timeout=..., target_phases=...,
                      config_file=...),
                 {"connection": {"config_file": None}, "policy": {"startup_timeout": None, "target_phases": None},
                  "forwarding": {"stream_logs": True, "max_log_lines": 1000, "max_followed_pods": 8}}, id="oldest"),
    pytest.param(_old(target_phases=[]), {"policy": {"target_phases": None}}, id="empty-targets"),
    # The deferred sensor's, by labels, waiting for the job to appear.
    pytest.param(_old(name="", uid=None, label_selector="app=x", wait_for_creation=True, on_kill_action="none"),
                 {"job": {"name": "", "uid": None, "label_selector": "app=x"},
                  "policy": {"wait_for_creation": True, "on_kill_action": "none"}}, id="sensor-by-labels"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "changed"), OLD_ROWS)
def test_a_trigger_stored_flat_by_an_earlier_version_loads_as_the_same_trigger(old, changed):
    loaded = T9kJobTrigger(**json.loads(json.dumps(old)))  # as the triggerer reads the row
    expected = {key: {**record, **changed.get(key, {})} for key, record in KWARGS.items()}
    assert loaded.serialize()[1] == {"version": 4, **expected}
    # and it behaves as the one deferred now: the same hook target, the same shared watch, the same event
    now = T9kJobTrigger(**expected)
    assert loaded._watch_key() == now._watch_key()
    assert (loaded.kind, loaded.name, loaded.namespace, loaded.uid) == (now.kind, now.name, now.namespace, now.uid)
    job = {"kind": "PyTorchTrainingJob", "metadata": {"name": "train-0123456789", "uid": "uid-1"}, "status": {"phase": "Running"}}
    assert loaded._event("timeout", job, "m").payload == now._event("timeout", job, "m").payload


def test_an_old_row_with_credentials_still_reaches_its_cluster_but_no_new_one_carries_them():
    old = {**OLD_FLAT, "config_dict": {"clusters": []}, "connection_extras": {"namespace": "ml"}}
    loaded = T9kJobTrigger(**old)
    hook = loaded.make_hook()
    assert (hook.config_dict, hook._extras) == ({"clusters": []}, {"namespace": "ml"})
    assert loaded._watch_key() != T9kJobTrigger(**OLD_FLAT)._watch_key()  # not shared with another identity
    assert "config_dict" not in T9kJobTrigger(**KWARGS).serialize()[1]


def test_doubled_arguments_are_refused():
    with pytest.raises(TypeError, match="'deadline' both flat and inside 'policy'"):
        T9kJobTrigger(**{**KWARGS, "deadline": "2026-11-25T12:00:00+00:00"})


# Rows a newer worker wrote (issue 28, point 6): what this triggerer does not know is ignored.
NEWER = [
    pytest.param({"version": 5, **KWARGS, "policy": {**KWARGS["policy"], "retry_budget": 3}}, "WaitPolicy fields retry_budget",
                 id="a-records-new-field"),
    pytest.param({"version": 5, **KWARGS, "tracing": {"span": "abc"}}, "key 'tracing'", id="a-new-record"),
    pytest.param({"version": 9, **KWARGS}, "nothing", id="only-a-higher-version"),
    pytest.param({**OLD_FLAT, "bogus": 1}, "key 'bogus'", id="unknown-flat"),
]  # fmt: skip


@pytest.mark.parametrize(("row", "ignored"), NEWER)
def test_a_row_a_newer_worker_wrote_loads_with_a_warning(row, ignored, caplog):
    import logging

    from airflow.models.trigger import Trigger
    from airflow.serialization.decoders import smart_decode_trigger_kwargs

    # As the triggerer reads it: stored through Airflow's own Trigger model, decrypted, decoded.
    stored = Trigger.encrypt_kwargs(row)
    kwargs = {k: smart_decode_trigger_kwargs(v) for k, v in Trigger._decrypt_kwargs(stored).items()}
    with caplog.at_level(logging.WARNING, logger="airflow_t9k.triggers.job"):
        loaded = T9kJobTrigger(**kwargs)
    assert (loaded.kind, loaded.name, loaded.uid, loaded.policy.on_kill_action) == ("PyTorchTrainingJob", "train-0123456789",
                                                                                     "uid-1", "pause")  # fmt: skip
    [warning] = [r.getMessage() for r in caplog.records if r.name == "airflow_t9k.triggers.job"]
    assert f"ignored: {ignored}" in warning, warning
    assert loaded.serialize()[1]["version"] == 4  # what it stores again is what it knows


def test_watch_key_is_shared_by_triggers_on_the_same_connection():
    a = T9kJobTrigger(**KWARGS)
    b = T9kJobTrigger(**{**KWARGS, "job": {**KWARGS["job"], "name": "other", "uid": "uid-2"}})
    c = T9kJobTrigger(**{**KWARGS, "connection": {**KWARGS["connection"], "kubernetes_conn_id": "other-cluster"}})
    assert a._watch_key() == b._watch_key() != c._watch_key()


TOKEN = "eyJhbGciOiJSUzI1NiJ9.sekrit-token-0123456789"
CERT = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tc2Vrcml0LWNlcnQ="
KEY = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLXNla3JpdC1rZXk="


def _kubeconfig(user: dict) -> dict:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": CERT}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }  # fmt: skip


def _deferred_trigger(monkeypatch, tmp_path, *, config_file: bool, extra: dict | None = None):
    from datetime import datetime

    from airflow.sdk import DAG

    from airflow_t9k.operators.kinds import GenericJobOperator

    if extra is not None:
        monkeypatch.setenv("AIRFLOW_CONN_K8S_SECRET", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(_kubeconfig({"token": TOKEN, "client-certificate-data": CERT, "client-key-data": KEY})))
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = GenericJobOperator(task_id="t", image="i", namespace="ml", deferrable=True,
                                kubernetes_conn_id="k8s_secret" if extra is not None else None,
                                config_file=str(path) if config_file else None)  # fmt: skip
    return op._trigger({"kind": "GenericJob", "name": "n", "namespace": "ml", "uid": "u"}, None), path


@pytest.mark.parametrize(
    ("config_file", "extra"),
    [
        (True, None),
        (False, {"kube_config": _kubeconfig({"token": TOKEN, "client-key-data": KEY}), "namespace": "ml"}),
        (False, {"kube_config": json.dumps(_kubeconfig({"token": TOKEN})), "namespace": "ml"}),
    ],
    ids=["config_file", "connection-kube_config-dict", "connection-kube_config-string"],
)
def test_the_stored_trigger_carries_no_credentials(monkeypatch, tmp_path, config_file, extra):
    trigger, path = _deferred_trigger(monkeypatch, tmp_path, config_file=config_file, extra=extra)
    stored = json.dumps(trigger.serialize()[1])
    for secret in (TOKEN, CERT, KEY, "sekrit"):
        assert secret not in stored, stored
    # what the triggerer needs to resolve them itself
    kwargs = trigger.serialize()[1]["connection"]
    assert kwargs["config_file"] == (str(path) if config_file else None)
    assert kwargs["kubernetes_conn_id"] == (None if config_file else "k8s_secret")


@pytest.mark.asyncio
async def test_the_triggerers_hook_reads_the_kubeconfig_file_itself(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(_kubeconfig({"token": TOKEN})))
    hook = T9kJobTrigger(kind="GenericJob", name="n", namespace="ml", kubernetes_conn_id=None, config_file=str(path)).make_hook()
    await hook._load_config()
    assert hook.client_configuration.host == "https://127.0.0.1:6443"
    assert hook.client_configuration.api_key["BearerToken"] == f"Bearer {TOKEN}"


@pytest.mark.asyncio
async def test_a_sensors_trigger_never_touches_the_job_on_kill():
    trigger = T9kJobTrigger(kind="GenericJob", name="n", namespace="ml", on_kill_action="none")
    trigger.make_hook = None  # type: ignore[assignment]  # any use would raise
    await trigger.on_kill()


def test_startup_remaining_counts_from_creation_and_only_before_the_job_starts():
    from airflow_t9k.triggers.job import startup_remaining

    created = "2026-11-25T12:00:00Z"
    at = datetime(2026, 11, 25, 12, 0, 30, tzinfo=timezone.utc).timestamp()

    def job(phase):
        return {"metadata": {"creationTimestamp": created}, "status": {"phase": phase} if phase else {}}

    assert startup_remaining(job(None), 60, now=at) == 30
    assert startup_remaining(job("Pending"), 20, now=at) == -10
    assert startup_remaining(job("Running"), 20, now=at) is None
    assert startup_remaining(job("Failed"), 20, now=at) is None
    assert startup_remaining(job("Pending"), None, now=at) is None


def _seen(uid):
    return {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml", "uid": uid}, "status": {"phase": "Running"}}


@pytest.mark.parametrize(
    ("given", "seen", "reported"),
    [("ours", _seen("ours"), "ours"),
     ("ours", _seen("stranger"), "ours"),  # another object took the name
     ("ours", None, "ours"),
     (None, _seen("theirs"), "theirs")],  # a trigger stored without a uid: what it saw is all it has
    ids=["same", "replaced", "unseen", "no-uid-given"],
)  # fmt: skip
def test_events_carry_the_triggers_own_uid(given, seen, reported):
    trigger = T9kJobTrigger(kind="GenericJob", name="j", namespace="ml", uid=given)
    assert trigger._event("error", seen, "m").payload["uid"] == reported


@pytest.mark.asyncio
@pytest.mark.parametrize(("action", "fired"), [("keep", False), ("none", False), ("delete", True), ("pause", True)])
async def test_on_kill_leaves_the_job_alone_when_told_or_once_the_event_fired(action, fired):
    trigger = T9kJobTrigger(kind="GenericJob", name="n", namespace="ml", on_kill_action=action)
    trigger._fired = fired
    trigger.make_hook = None  # type: ignore[assignment]  # any use would raise
    await trigger.on_kill()


@pytest.mark.asyncio
async def test_yielding_the_event_marks_the_trigger_fired():
    from airflow.triggers.base import TriggerEvent

    trigger = T9kJobTrigger(kind="GenericJob", name="n", namespace="ml")

    async def ended() -> TriggerEvent:
        return TriggerEvent({"status": "success"})

    trigger._bounded = ended  # type: ignore[method-assign]  # the wait itself is the integration tests'
    assert not trigger._fired
    await trigger.run().__anext__()
    assert trigger._fired


class _SlowHook:
    """The trigger's hook at the deadline: credentials that take ``load`` seconds (the triggerer's
    supervisor busy), then a GET that takes ``answer`` seconds (the API server)."""

    def __init__(self, load: float, answer: float, phase: str) -> None:
        self.load, self.answer, self.phase = load, answer, phase
        self.loaded = self.closed = False

    async def kube(self) -> None:  # as AsyncT9kHook's: static credentials load once, on first use
        if not self.loaded:
            await asyncio.sleep(self.load)
            self.loaded = True

    async def get_job(self, kind: str, name: str, namespace: str) -> dict:
        await self.kube()
        await asyncio.sleep(self.answer)
        return {"kind": kind, "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
                "status": {"phase": self.phase}}  # fmt: skip

    async def close(self) -> None:
        self.closed = True


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("load", "answer", "status", "message"),
    [(0.0, 0.0, "success", "phase Succeeded"),
     (0.3, 0.0, "success", "phase Succeeded"),  # credentials slower than the read's own bound: not a job never seen
     (0.0, 0.3, "timeout", "(never seen)"),  # the API server did not answer in time
     (0.9, 0.0, "timeout", "credentials for the cluster did not load within 0.6s")],
    ids=["prompt", "slow-credentials", "no-answer", "credentials-never-load"],
)  # fmt: skip
async def test_the_read_at_the_deadline_bounds_credentials_and_the_answer_apart(monkeypatch, load, answer, status, message):
    from airflow_t9k.triggers import outcome

    monkeypatch.setattr(outcome, "LAST_READ", 0.2)
    monkeypatch.setattr(outcome, "CREDENTIALS_WITHIN", 0.6)
    trigger = T9kJobTrigger(**{**KWARGS, "policy": {**KWARGS["policy"], "target_phases": None}})
    hook = _SlowHook(load, answer, "Succeeded")
    trigger.make_hook = lambda: hook  # type: ignore[assignment]  # the hook's timing is what is tested
    payload = (await trigger._at_deadline()).payload
    assert payload["status"] == status, payload
    assert message in payload["message"], payload
    assert hook.closed


# -- a kill that is not one: Airflow 3.3.2's triggerer calls on_kill for triggers it lost ------
@pytest.mark.parametrize(
    ("state", "unreadable", "acts"),
    [("failed", None, True),  # Mark failed
     ("success", None, True),  # Mark success
     (None, None, True),  # Clear: no state until scheduled again
     ("restarting", None, True),
     ("up_for_retry", None, True),
     ("scheduled", None, True),
     ("deferred", None, False),  # the trigger moved to another triggerer
     (None, "no answer within 10s", False),
     ("failed", "ErrorResponse", False)],  # an unreadable answer means nothing
)  # fmt: skip
def test_on_kill_acts_only_when_the_task_is_really_stopped(state, unreadable, acts):
    from airflow_t9k.triggers.outcome import kill_decision

    decision = kill_decision(state, unreadable)
    assert (decision == "act") is acts
    if not acts:
        assert "the job stays" in decision


@pytest.mark.parametrize(
    ("map_index", "states", "expected"),
    [(-1, {"r": {"t": "deferred"}}, ("deferred", None)),
     (3, {"r": {"t_3": "failed", "t": "deferred"}}, ("failed", None)),  # a mapped instance's own key
     (-1, {"r": {"t": None}}, (None, None)),
     (-1, {"other": {"t": "failed"}}, (None, "task instance d/r/t not found")),
     (2, {"r": {"t_1": "failed"}}, (None, "task instance d/r/t_2 not found"))],
)  # fmt: skip
def test_the_task_state_is_read_from_the_supervisors_answer(map_index, states, expected):
    from types import SimpleNamespace

    from airflow_t9k.triggers.outcome import state_in

    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="t", map_index=map_index)
    assert state_in(SimpleNamespace(task_states=states), ti) == expected
    state, why = state_in(SimpleNamespace(error="not found"), ti)  # an ErrorResponse
    assert state is None
    assert why
    assert "SimpleNamespace" in why


@pytest.mark.parametrize(("timeout", "budget"), [(30, 28), (5, 3), (2, 1), (0, 1), (-1, 1)])
def test_on_kill_keeps_a_margin_within_the_triggerers_bound(timeout, budget):
    from airflow_t9k.triggers.outcome import kill_budget

    assert kill_budget(timeout) == budget


@pytest.mark.asyncio
@pytest.mark.parametrize("state", ["deferred", None])
async def test_on_kill_of_a_moved_trigger_never_touches_the_job(monkeypatch, state):
    from types import SimpleNamespace

    from airflow_t9k.triggers import outcome

    async def read(ti):
        return ("deferred", None) if state else (None, "no answer within 10s")

    monkeypatch.setattr(outcome, "task_state", read)
    trigger = T9kJobTrigger(kind="GenericJob", name="n", namespace="ml", on_kill_action="delete")
    trigger.task_instance = SimpleNamespace(dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1)
    trigger.make_hook = None  # type: ignore[assignment]  # any use would raise
    await trigger.on_kill()


@pytest.mark.asyncio
async def test_on_kill_ends_within_the_triggerers_bound_when_credentials_are_slow(monkeypatch, caplog, capsys):
    import asyncio
    import time as _time

    monkeypatch.setenv("AIRFLOW__TRIGGERER__ON_KILL_TIMEOUT", "3")

    class SlowHook:
        closed = False

        async def kube(self):
            await asyncio.sleep(60)

        async def close(self):
            SlowHook.closed = True

    trigger = T9kJobTrigger(kind="GenericJob", name="n", namespace="ml", on_kill_action="delete")
    trigger.make_hook = SlowHook  # type: ignore[assignment]
    started = _time.monotonic()
    with caplog.at_level("WARNING"):
        await trigger.on_kill()
    assert _time.monotonic() - started < 2.5  # 3 s less the margin: the triggerer's own cut never comes
    assert SlowHook.closed
    said = caplog.text + capsys.readouterr().out  # the trigger's logger goes through structlog
    assert "loading the triggerer's credentials took longer than 1s" in said
