"""T9kJobSensor without a cluster: templating, defaults, and how it reads a trigger's event."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from airflow_t9k.sensors.job import T9kJobSensor, _phases


def sensor(**kw):
    kw.setdefault("name", "train-1")
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return T9kJobSensor(task_id="wait", kind="GenericJob", **kw)


def test_kind_targets_and_connection_are_templated():
    assert {"kind", "target_phases", "kubernetes_conn_id", "name", "namespace", "label_selector"} <= set(
        T9kJobSensor.template_fields
    )


def test_it_does_not_stream_the_replicas_logs_by_default():
    s = sensor()
    assert (s.stream_logs, s.log_events) == (False, False)
    assert (s.config_file, s.cluster_context, s.in_cluster) == (None, None, None)


@pytest.mark.parametrize(
    ("given", "targets"),
    [
        (("Running",), ("Running",)),
        (["Running", "Succeeded"], ("Running", "Succeeded")),
        ("Running, Succeeded", ("Running", "Succeeded")),
        ("Succeeded", ("Succeeded",)),
    ],
)
def test_target_phases_as_rendered(given, targets):
    assert _phases(given) == targets
    assert sensor(target_phases=given).targets == targets


def test_namespace_comes_from_the_connection_when_not_given(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_K8S_NS", '{"conn_type": "kubernetes", "extra": {"namespace": "team-a"}}')
    assert sensor(kubernetes_conn_id="k8s_ns")._namespace() == "team-a"
    assert sensor(kubernetes_conn_id="k8s_ns", namespace="ml")._namespace() == "ml"


def test_execute_complete_reads_the_event():
    s = sensor(target_phases=("Running",))
    assert s.execute_complete({}, {"status": "success", "phase": "Running", "name": "train-1"}) is None
    with pytest.raises(AirflowException, match="ended badly"):
        s.execute_complete({}, {"status": "failed", "phase": "Failed", "name": "train-1", "message": "ended badly"})
    with pytest.raises(AirflowSensorTimeout, match="timed out"):
        s.execute_complete({}, {"status": "timeout", "phase": "Pending", "name": "train-1", "message": "timed out"})


class NoCluster:
    """A hook for a sensor that must not read the cluster on the worker: only the namespace."""

    def get_namespace(self):
        return None

    def __getattr__(self, name):
        raise AssertionError(f"the deferred sensor called {name} on the worker")


class OneRead:
    """A hook that answers the one read a deferrable sensor makes on the worker."""

    def __init__(self, job):
        self.job, self.reads = job, 0

    def get_namespace(self):
        return None

    def get_job(self, kind, name, namespace):
        self.reads += 1
        return self.job

    def list_jobs(self, kind, namespace, selector):
        self.reads += 1
        return [self.job] if self.job else []


@pytest.mark.parametrize(("kw", "name", "selector"), [({"name": "train-1"}, "train-1", None),
                                                      ({"name": None, "label_selector": "app=train"}, "", "app=train")],
                         ids=["by-name", "by-labels"])  # fmt: skip
def test_a_deferrable_sensor_reads_once_then_defers(kw, name, selector):
    from airflow.sdk.exceptions import TaskDeferred

    s = sensor(deferrable=True, namespace="ml", **kw)
    s._hook = OneRead(None)  # not there yet
    with pytest.raises(TaskDeferred) as exc:
        s.execute({})
    assert s._hook.reads == 1
    trigger = exc.value.trigger
    assert (trigger.name, trigger.job.label_selector, trigger.policy.wait_for_creation) == (name, selector, True)
    assert (trigger.policy.on_kill_action, trigger.policy.startup_error_grace, trigger.uid) == ("none", None, None)


def _job(phase):
    return {"metadata": {"name": "train-1", "labels": {"app": "train"}}, "status": {"phase": phase}}


def test_a_deferrable_sensor_on_a_job_already_done_ends_on_the_worker():
    # As Airflow's own deferrable sensors: no trigger firing a second after the deferral (apache/airflow#72716).
    s = sensor(deferrable=True, namespace="ml")
    s._hook = OneRead(_job("Succeeded"))
    assert s.execute({}) is None
    s._hook = OneRead(_job("Failed"))
    with pytest.raises(AirflowException, match="ended Failed"):
        s.execute({})


def test_a_bad_label_selector_fails_on_the_worker():
    s = sensor(deferrable=True, namespace="ml", name=None, label_selector="app=a=b")
    s._hook = NoCluster()
    with pytest.raises(AirflowException, match="label selector"):
        s.execute({})


class Jobs:
    """What each GET of the job returns, in turn (None: gone)."""

    def __init__(self, *phases):
        self.phases = list(phases)

    def get_job(self, kind, name, namespace):
        phase = self.phases.pop(0)
        return None if phase is None else {"kind": kind, "metadata": {"name": name}, "status": {"phase": phase}}

    def get_namespace(self):
        return "ml"


class StateStore(dict):
    def set(self, key, value, **_):
        self[key] = value


@pytest.mark.parametrize(
    ("targets", "phase", "outcome"),
    [(("Running",), "Running", True),
     (("Running",), "Succeeded", True),  # it ran, and ended between two pokes
     (("Running",), "Failed", AirflowException),  # it may never have run
     (("Running",), "Pending", False),
     (("Succeeded",), "Failed", AirflowException)],
)  # fmt: skip
def test_a_job_that_went_through_the_target_phase_counts(targets, phase, outcome):
    s = sensor(target_phases=targets, mode="reschedule")
    s._hook = Jobs(phase)
    if outcome is AirflowException:
        with pytest.raises(AirflowException, match="not in"):
            s.poke({"task_state_store": StateStore()})
    else:
        assert s.poke({"task_state_store": StateStore()}) is outcome


def test_deleted_after_it_was_seen_survives_a_reschedule():
    """Each poke of mode="reschedule" is a new process: which job was seen lives in the task state store."""
    store = StateStore()
    first = sensor(mode="reschedule")
    first._hook = Jobs("Running")
    assert first.poke({"task_state_store": store}) is False
    later = sensor(mode="reschedule")  # the next poke: a new operator object, nothing in memory
    later._hook = Jobs(None)
    with pytest.raises(AirflowException, match="deleted after it was seen"):
        later.poke({"task_state_store": store})
    never = sensor(mode="reschedule")  # a job never seen: it may still come
    never._hook = Jobs(None)
    assert never.poke({"task_state_store": StateStore()}) is False
