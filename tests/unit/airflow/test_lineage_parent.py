"""Every replica gets the task's OpenLineage run (issue 30, item 5): what is injected where, the
opt-out, and the ids as the provider's macros make them (apache-airflow-providers-openlineage is
in the test extra; an OpenLineage transport is configured through OPENLINEAGE_URL here)."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter

from airflow_t9k.api.checkpoint import pod_templates
from airflow_t9k.operators.kinds import OPERATORS, ColossalAIJobOperator, GenericJobOperator
from airflow_t9k.operators.lineage_parent import NAMES, inject, parent_env
from tests.unit.airflow.test_operators import FakeTI, op

LOGICAL = datetime(2026, 11, 25, 10, 0, tzinfo=timezone.utc)
PARENT, ROOT = ("default", "dag.train", "run-1"), ("default", "dag", "root-1")


class RunTI(FakeTI):
    """A task instance with its DAG run, as the macros read it."""

    def __init__(self, conf: dict | None = None, **kw):
        super().__init__(**kw)
        self.try_number = 2
        self.dag_run = SimpleNamespace(logical_date=LOGICAL, run_after=LOGICAL, conf=conf or {}, clear_number=0)

    def get_template_context(self) -> dict:
        return {"dag_run": self.dag_run}


@pytest.fixture
def enabled(monkeypatch):
    """The provider enabled: a transport configured (is_disabled() reads OPENLINEAGE_URL each time)."""
    monkeypatch.setenv("OPENLINEAGE_URL", "http://lineage.example:5000")


def env_of(container: dict) -> dict[str, str]:
    env = container.get("env") or []
    return {e["name"]: e.get("value") for e in env} if isinstance(env, list) else {}


def containers(job: dict) -> list[dict]:
    return [c for t in pod_templates(job) for c in [*t["spec"].get("initContainers", []), *t["spec"]["containers"]]]


def test_parent_env_is_the_macros_strings_and_their_parts():
    env = {e["name"]: e["value"] for e in parent_env(PARENT, ROOT)}
    assert env == {
        "OPENLINEAGE_PARENT_ID": "default/dag.train/run-1",
        "OPENLINEAGE_PARENT_JOB_NAMESPACE": "default",
        "OPENLINEAGE_PARENT_JOB_NAME": "dag.train",
        "OPENLINEAGE_PARENT_RUN_ID": "run-1",
        "OPENLINEAGE_ROOT_PARENT_ID": "default/dag/root-1",
        "OPENLINEAGE_ROOT_PARENT_JOB_NAMESPACE": "default",
        "OPENLINEAGE_ROOT_PARENT_JOB_NAME": "dag",
        "OPENLINEAGE_ROOT_PARENT_RUN_ID": "root-1",
    }
    assert set(env) == set(NAMES)


POD = {"containers": [{"name": "main", "image": "i"}, {"name": "side", "image": "i", "env": [{"name": "A", "value": "1"}]}],
       "initContainers": [{"name": "init", "image": "i"}]}  # fmt: skip


@pytest.mark.parametrize(
    ("containers_", "injected"),
    [
        (POD, ["init", "main", "side"]),
        # A container that names any of the variables keeps its own: the provider skips properties already given.
        ({"containers": [{"name": "main", "image": "i", "env": [{"name": "OPENLINEAGE_PARENT_ID", "value": "x/y/z"}]},
                         {"name": "other", "image": "i"}]}, ["other"]),
        ({"containers": [{"name": "main", "image": "i", "env": "not a list"}]}, []),  # left for the API server to refuse
    ],
)  # fmt: skip
def test_inject_reaches_every_container_that_does_not_set_them_itself(containers_, injected):
    job = {"kind": "GenericJob", "spec": {"replicaSpecs": [{"type": "worker", "template": {"spec": copy.deepcopy(containers_)}}]}}
    assert inject(job, parent_env(PARENT, ROOT)) == len(injected)
    got = [c["name"] for c in containers(job) if env_of(c).get("OPENLINEAGE_PARENT_RUN_ID") == "run-1"]
    assert sorted(got) == injected
    side = next((c for c in containers(job) if c["name"] == "side"), None)
    if side is not None:
        assert env_of(side)["A"] == "1"  # what was there stays, first


@pytest.mark.parametrize("kind", sorted(OPERATORS))
def test_every_operator_gives_every_replica_the_tasks_run(kind, enabled):
    ti = RunTI()
    job = op(OPERATORS[kind], command="python t.py", replicas=2).render_job({"ti": ti})
    run_id = OpenLineageAdapter.build_task_instance_run_id(
        dag_id="dag", task_id="train", try_number=2, logical_date=LOGICAL, map_index=-1
    )
    root = OpenLineageAdapter.build_dag_run_id(dag_id="dag", logical_date=LOGICAL, clear_number=0)
    found = containers(job)
    assert found
    for c in found:
        env = env_of(c)
        assert env["OPENLINEAGE_PARENT_ID"] == f"default/dag.train/{run_id}", c
        assert env["OPENLINEAGE_ROOT_PARENT_ID"] == f"default/dag/{root}", c


def test_the_colossalai_launcher_gets_them_too(enabled):
    job = op(ColossalAIJobOperator, command="python t.py", replicas=2).render_job({"ti": RunTI()})
    assert env_of(job["spec"]["launcher"])["OPENLINEAGE_PARENT_JOB_NAME"] == "dag.train"


def test_a_dag_run_started_with_parent_information_is_the_root(enabled):
    conf = {"openlineage": {"parentRunId": "01990000-0000-7000-8000-000000000001", "parentJobNamespace": "upstream",
                            "parentJobName": "orchestrator.job"}}  # fmt: skip
    job = op(GenericJobOperator, command="python t.py").render_job({"ti": RunTI(conf=conf)})
    [c] = containers(job)
    assert env_of(c)["OPENLINEAGE_ROOT_PARENT_ID"] == "upstream/orchestrator.job/01990000-0000-7000-8000-000000000001"


@pytest.mark.parametrize(
    ("argument", "config", "injected"),
    [(None, None, True), (False, None, False), (None, "False", False), (True, "False", True), (False, "True", False)],
)
def test_the_opt_out(argument, config, injected, enabled, monkeypatch):
    if config is not None:
        monkeypatch.setenv("AIRFLOW__T9K__OPENLINEAGE_INJECT_PARENT_JOB_INFO", config)
    job = op(GenericJobOperator, command="python t.py", openlineage_inject_parent_job_info=argument).render_job({"ti": RunTI()})
    [c] = containers(job)
    assert ("OPENLINEAGE_PARENT_ID" in env_of(c)) is injected


def test_nothing_where_openlineage_is_disabled(monkeypatch):
    monkeypatch.delenv("OPENLINEAGE_URL", raising=False)
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    [c] = containers(op(GenericJobOperator, command="python t.py").render_job({"ti": RunTI()}))
    assert not set(env_of(c)) & set(NAMES)


def test_a_task_instance_the_macros_cannot_read_submits_the_job_without_them(enabled):
    # The dry run's placeholder task instance, for instance: lineage never fails a task.
    [c] = containers(op(GenericJobOperator, command="python t.py").render_job({"ti": FakeTI()}))
    assert not set(env_of(c)) & set(NAMES)


def test_refuses_a_non_boolean_opt_out():
    with pytest.raises(ValueError, match="openlineage_inject_parent_job_info"):
        op(GenericJobOperator, command="x", openlineage_inject_parent_job_info="no")
