"""T9kJobTrigger's contract: serialize() round-trips with primitive kwargs only."""

from __future__ import annotations

import json

from airflow_t9k.triggers.job import T9kJobTrigger

KWARGS = {
    "kind": "PyTorchTrainingJob",
    "name": "train-0123456789",
    "namespace": "ml",
    "uid": "uid-1",
    "kubernetes_conn_id": "k8s",
    "cluster_context": "ctx",
    "config_dict": None,
    "in_cluster": False,
    "connection_extras": {"namespace": "ml"},
    "deadline": "2026-11-25T12:00:00+00:00",
    "log_events": True,
    "max_forwarded": 100,
    "log_tail_lines": 20,
    "on_kill_action": "pause",
    "events_since": "2026-11-25T11:00:00+00:00",
    "stream_logs": True,
    "max_log_lines": 500,
    "max_followed_pods": 4,
}


def test_serialize_returns_the_classpath_and_exact_kwargs():
    classpath, kwargs = T9kJobTrigger(**KWARGS).serialize()
    assert classpath == "airflow_t9k.triggers.job.T9kJobTrigger"
    assert kwargs == KWARGS


def test_serialize_round_trips_through_json():
    classpath, kwargs = T9kJobTrigger(**KWARGS).serialize()
    again = T9kJobTrigger(**json.loads(json.dumps(kwargs)))
    assert again.serialize() == (classpath, kwargs)


def test_watch_key_is_shared_by_triggers_on_the_same_connection():
    a = T9kJobTrigger(**KWARGS)
    b = T9kJobTrigger(**{**KWARGS, "name": "other", "uid": "uid-2"})
    c = T9kJobTrigger(**{**KWARGS, "kubernetes_conn_id": "other-cluster"})
    assert a._watch_key() == b._watch_key() != c._watch_key()
