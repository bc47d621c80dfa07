"""The Airflow side of queues: queue_name=/priority= on every operator, the task-log line, and
startup_timeout vs queue_timeout."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.queueing import note, queue_remaining, with_queue
from airflow_t9k.kinds.registry import get_kind
from airflow_t9k.operators.kinds import OPERATORS, AscendJobOperator, GenericJobOperator
from airflow_t9k.triggers.job import T9kJobTrigger, startup_remaining
from tests.unit.airflow.test_operators import ctx, op

CREATED = "2026-11-25T12:00:00Z"
AT = datetime(2026, 11, 25, 12, 1, 0, tzinfo=timezone.utc).timestamp()  # 60 s after creation


def job(phase: str | None = "Pending", admitted: str | None = None, since: str = "2026-11-25T12:00:10Z",
        message: str = "couldn't assign flavors to pod set worker: insufficient unused quota") -> dict:  # fmt: skip
    status: dict = {"phase": phase} if phase else {}
    if admitted is not None:
        status["conditions"] = [{"type": "Admitted", "status": admitted, "reason": "Pending", "message": message,
                                 "lastTransitionTime": since}]  # fmt: skip
    return {"kind": "GenericJob", "metadata": {"creationTimestamp": CREATED},
            "spec": {"scheduler": {"t9kScheduler": {"queue": "gpu"}}}, "status": status}  # fmt: skip


@pytest.mark.parametrize(
    ("the_job", "startup", "queue"),
    [(job(), -30, None),                      # no queue: startup counts from creation, as before
     (job(admitted="False"), None, 40),       # waiting since 12:00:10: startup paused, queue clock runs
     (job(admitted="True"), -20, None),       # admitted at 12:00:10: startup counts from admission
     (job("Running", admitted="True"), None, None),
     (job(admitted="False", since="2026-11-25T12:00:50Z"), None, 80)],  # evicted at 12:00:50: waits from then
    ids=["no-queue", "waiting", "admitted", "running", "evicted"],
)  # fmt: skip
def test_time_in_a_queue_is_not_startup_time_and_queue_timeout_bounds_it(the_job, startup, queue):
    assert startup_remaining(the_job, 30, now=AT) == startup
    assert queue_remaining(the_job, 90, AT) == queue
    assert queue_remaining(the_job, None, AT) is None


def test_the_task_log_line_names_the_queue_and_kueues_message():
    assert (
        note(job(admitted="False"))
        == "waiting in queue gpu: couldn't assign flavors to pod set worker: insufficient unused quota"
    )
    assert note(job(admitted="True", message="Admitted by ClusterQueue cq through LocalQueue gpu.")).startswith(
        "admitted from queue gpu"
    )
    assert note(job()) is None
    unnamed = job(admitted="False")
    unnamed["spec"]["scheduler"]["t9kScheduler"] = {"priority": 50}  # seeds 001/003: queue "default" unless named
    assert note(unnamed).startswith("waiting in queue default:")


@pytest.mark.parametrize("kind", sorted(k for k in OPERATORS if k != "AscendJob"))
def test_every_operator_takes_queue_and_priority_and_the_controller_accepts_the_job(kind):
    rendered = op(OPERATORS[kind], replicas=2, queue_name="gpu", priority=10, command=["python", "t.py"]).render_job(ctx())
    assert rendered["spec"]["scheduler"]["t9kScheduler"] == {"queue": "gpu", "priority": 10}
    get_kind(kind).validate(rendered)


def test_a_job_given_whole_keeps_its_scheduler_fields_unless_told():
    given = {"kind": "GenericJob", "spec": {"scheduler": {"t9kScheduler": {"queue": "a", "priority": 1}},
                                            "replicaSpecs": []}}  # fmt: skip
    from airflow_t9k.operators.job import T9kJobOperator

    assert op(T9kJobOperator, job=given).render_job(ctx())["spec"]["scheduler"]["t9kScheduler"] == {"queue": "a", "priority": 1}
    told = op(T9kJobOperator, job=given, queue_name="b").render_job(ctx())
    assert told["spec"]["scheduler"]["t9kScheduler"] == {"queue": "b", "priority": 1}


def test_ascend_operator_takes_its_own_scheduling_fields():
    rendered = op(AscendJobOperator, replicas=3, npus=1, queue_name="npu", min_available=2, priority_class="high").render_job(
        ctx()
    )
    assert rendered["spec"]["runPolicy"]["schedulingPolicy"] == {"queue": "npu", "minAvailable": 2, "priorityClass": "high"}
    get_kind("AscendJob").validate(rendered)
    with pytest.raises(AirflowException, match="priority_class="):
        op(AscendJobOperator, replicas=2, queue_name="npu", priority=5).render_job(ctx())
    with pytest.raises(AirflowException, match="AscendJob's"):
        op(GenericJobOperator, queue_name="gpu", min_available=2).render_job(ctx())


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"priority": "high"}, "priority must be an integer"), ({"min_available": 0}, "min_available must be a positive integer")],
)
def test_bad_queue_arguments_fail_at_dag_parse(kwargs, error):
    with pytest.raises(ValueError, match=error):
        op(GenericJobOperator, **kwargs)


def test_nothing_given_changes_nothing():
    manifest = {"kind": "GenericJob", "spec": {}}
    assert with_queue(manifest) is manifest


def test_the_trigger_carries_queue_timeout_through_serialization():
    trigger = T9kJobTrigger(kind="GenericJob", name="j", namespace="ml", queue_timeout=120.0)
    _classpath, kwargs = trigger.serialize()
    assert kwargs["policy"]["queue_timeout"] == 120.0
    assert T9kJobTrigger(**json.loads(json.dumps(kwargs))).policy.queue_timeout == 120.0
    assert T9kJobTrigger(kind="GenericJob", name="j", namespace="ml").serialize()[1]["policy"]["queue_timeout"] is None


def test_the_operator_hands_queue_timeout_to_the_trigger():
    o = op(GenericJobOperator, queue_name="gpu", queue_timeout=300)
    trigger = o._trigger({"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u"}, None)
    assert trigger.policy.queue_timeout == 300


# -- queue= is Airflow's executor queue; the job's queue is queue_name= ------------------------
def _serialized_round_trip(dag):
    from airflow.serialization.serialized_objects import DagSerialization

    return DagSerialization.from_dict(DagSerialization.to_dict(dag))


@pytest.mark.parametrize(
    ("kwargs", "default_args", "executor_queue", "job_queue"),
    [({}, {}, "default", None),
     ({"queue": "celery_gpu"}, {}, "celery_gpu", None),
     ({}, {"queue": "celery_gpu"}, "celery_gpu", None),
     ({"queue_name": "gpu"}, {"queue": "celery_gpu"}, "celery_gpu", "gpu"),
     ({"queue": "celery_gpu", "queue_name": "gpu"}, {}, "celery_gpu", "gpu")],
    ids=["neither", "queue-kwarg", "queue-default-args", "both-default-args", "both"],
)  # fmt: skip
def test_queue_routes_the_task_and_queue_name_the_job(kwargs, default_args, executor_queue, job_queue):
    from airflow.sdk import DAG

    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None, default_args=default_args) as dag:
        o = GenericJobOperator(task_id="train", image="img", namespace="ml", **kwargs)
    assert o.queue == executor_queue
    sched = o.render_job(ctx())["spec"].get("scheduler")
    assert (sched["t9kScheduler"]["queue"] if sched else None) == job_queue
    # What the scheduler and a Celery worker see: the serialized DAG keeps Airflow's queue.
    task = _serialized_round_trip(dag).get_task("train")
    assert task.queue == executor_queue


def test_queue_name_is_templated():
    o = op(GenericJobOperator, queue_name="{{ params.q }}")
    o.render_template_fields({**ctx(), "params": {"q": "gpu-a"}})
    assert o.rendered_job["spec"]["scheduler"]["t9kScheduler"]["queue"] == "gpu-a"
