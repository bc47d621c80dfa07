"""The operator, hook and trigger against the real API server and controller.

The Airflow side is a minimal stand-in for the task instance and its state store, so each
path (defer, reattach, adopt, conflict, kill, timeout) can be driven exactly; whole DAGs run
under real Airflow in test_airflow_dags.py.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout, TaskDeferred

from airflow_t9k.operators.kinds import GenericJobOperator
from airflow_t9k.triggers.job import T9kJobTrigger
from tests.support.cluster import wait_until
from tests.support.task import Store, context


@pytest.fixture
def conn(monkeypatch, cluster, namespace):
    extra = f'{{"kube_config_path": "{cluster.kubeconfig}", "namespace": "{namespace}"}}'
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", f'{{"conn_type": "kubernetes", "extra": {extra}}}')


def make_op(sim=None, **kw):
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return GenericJobOperator(task_id="train", image="busybox", replicas=2, pod_annotations=sim or {}, **kw)


def test_defers_with_a_trigger_for_exactly_the_submitted_job(conn, jobs, controller):
    ctx = context()
    with pytest.raises(TaskDeferred) as exc:
        make_op(deferrable=True, timeout=600).execute(ctx)
    trigger = exc.value.trigger
    ident = ctx["task_state_store"]["t9k_job"]
    job = jobs.get("GenericJob", ident["name"])
    assert isinstance(trigger, T9kJobTrigger)
    assert exc.value.method_name == "execute_complete"
    assert (trigger.name, trigger.namespace, trigger.uid) == (ident["name"], jobs.ns, job["metadata"]["uid"])
    assert trigger.policy.deadline is not None
    assert ctx["ti"].xcom["t9k_job"]["uid"] == job["metadata"]["uid"]  # pushed before deferring
    assert job["metadata"]["labels"]["airflow-t9k.io/task-id"] == "train"


def test_retry_reattaches_to_the_same_job_instead_of_submitting_another(conn, jobs, controller):
    store = Store()
    with pytest.raises(TaskDeferred):
        make_op(deferrable=True).execute(context(store))
    first_uid = store["t9k_job"]["uid"]
    with pytest.raises(TaskDeferred) as exc:  # the retry, e.g. after the worker died
        make_op(deferrable=True).execute(context(store, try_number=2))
    assert exc.value.trigger.uid == first_uid
    items = jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns, "genericjobs")["items"]
    assert [i["metadata"]["uid"] for i in items] == [first_uid]


def test_a_name_conflict_never_adopts_a_job_the_task_did_not_record(conn, jobs, controller):
    # Annotations are written by whoever creates a job: only the uid the task recorded makes a job
    # its own (issue 29, point 7). A run whose state store does not know the job runs beside it.
    with pytest.raises(TaskDeferred) as first:
        make_op(deferrable=True).execute(context())
    with pytest.raises(TaskDeferred) as second:
        make_op(deferrable=True).execute(context())  # the same task, run id and try, a fresh state store
    name = first.value.trigger.name
    assert second.value.trigger.name == f"{name}-t1"
    assert second.value.trigger.uid != first.value.trigger.uid
    with pytest.raises(TaskDeferred) as third:
        make_op(deferrable=True).execute(context())
    assert third.value.trigger.name == f"{name}-t1-2"  # the next free name, not a failure


def test_retry_after_a_failed_job_runs_it_again(conn, jobs, controller):
    store = Store()
    sim = {"sim.t9k.test/duration": "1s", "sim.t9k.test/fail-pods": "-worker-0$", "sim.t9k.test/exit-code": "3"}
    with pytest.raises(AirflowException, match="failed replicas"):
        make_op(sim=sim, deferrable=False).execute(context(store))
    failed_uid = store["t9k_job"]["uid"]
    with pytest.raises(TaskDeferred) as exc:
        make_op(sim=sim, deferrable=True).execute(context(store, try_number=2))
    assert exc.value.trigger.uid != failed_uid


def test_sync_wait_succeeds_and_deletes_on_success(conn, jobs, controller):
    ctx = context()
    out = make_op(sim={"sim.t9k.test/duration": "1s"}, deferrable=False, delete_on_finish="on_success").execute(ctx)
    assert out["phase"] == "Succeeded"
    wait_until(lambda: jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns,
                                                              "genericjobs")["items"] == [],
               what="job deleted on success")  # fmt: skip


def test_sync_timeout_deletes_the_job(conn, jobs, controller):
    store = Store()
    with pytest.raises(AirflowTaskTimeout):
        make_op(deferrable=False, timeout=3).execute(context(store))
    name = store["t9k_job"]["name"]
    wait_until(lambda: _gone(jobs, name), what="job deleted after timeout")


def test_sync_kill_deletes_and_pause_action_pauses(conn, jobs, controller):
    op = make_op(deferrable=False, wait_for_completion=False)
    ident = op.execute(context())
    op.on_kill()
    wait_until(lambda: _gone(jobs, ident["name"]), what="killed job deleted")
    op2 = make_op(deferrable=False, wait_for_completion=False, on_kill_action="pause")
    ident2 = op2.execute(context(run_id="manual__2"))
    op2.on_kill()
    jobs.wait_phase("GenericJob", ident2["name"], "Paused")


def _gone(jobs, name):
    try:
        jobs.get("GenericJob", name)
        return False
    except Exception as exc:  # noqa: BLE001 - 404 from the API
        return getattr(exc, "status", None) == 404


def _trigger_for(jobs, conn_ok, sim=None, **kw):
    with pytest.raises(TaskDeferred) as exc:
        make_op(sim=sim, deferrable=True, **kw).execute(context())
    return exc.value.trigger


async def first_event(trigger, timeout=60):
    return await asyncio.wait_for(trigger.run().__anext__(), timeout)


@pytest.mark.asyncio
async def test_trigger_yields_success_once_the_job_succeeds(conn, jobs, controller):
    trigger = _trigger_for(jobs, conn, sim={"sim.t9k.test/duration": "2s"})
    event = (await first_event(trigger)).payload
    assert (event["status"], event["phase"]) == ("success", "Succeeded")
    assert event["uid"] == trigger.uid


@pytest.mark.asyncio
async def test_trigger_reports_failure_with_replica_log_tails(conn, cluster, jobs, controller):
    sim = {"sim.t9k.test/duration": "1s", "sim.t9k.test/fail-pods": "-worker-1$", "sim.t9k.test/exit-code": "137"}
    trigger = _trigger_for(jobs, conn, sim=sim)
    event = (await first_event(trigger)).payload
    assert event["status"] == "failed"
    assert f"{trigger.name}-worker-1" in event["state"]["failed_replicas"]
    assert [r["pod"] for r in event["failed_first"]] == [f"{trigger.name}-worker-1"]
    tail = event["logs"][f"{trigger.name}-worker-1"]  # the root cause's last lines
    if not cluster.external:  # kwok serves the namespace's pod-log file: the tail is its end
        last = cluster.pod_log(jobs.ns).read_text().splitlines()[-1]
        assert tail.splitlines()[-1] == last.split(" ", 3)[3], tail
    assert tail
    assert "log not available" not in tail


@pytest.mark.asyncio
async def test_trigger_reports_a_deleted_job(conn, jobs, controller):
    trigger = _trigger_for(jobs, conn)
    task = asyncio.create_task(first_event(trigger))
    await asyncio.sleep(1)
    assert not task.done()  # still waiting: the job runs
    jobs.delete("GenericJob", trigger.name)
    event = (await task).payload
    assert event["status"] == "error"
    assert "was deleted" in event["message"]


@pytest.mark.asyncio
async def test_trigger_deadline_gives_a_timeout_event(conn, jobs, controller):
    trigger = _trigger_for(jobs, conn, timeout=2)
    event = (await first_event(trigger)).payload
    assert event["status"] == "timeout"


@pytest.mark.asyncio
@pytest.mark.parametrize(("action", "expect"), [("delete", "gone"), ("pause", "Paused")])
async def test_trigger_on_kill_leaves_no_job_running(conn, jobs, controller, action, expect):
    trigger = _trigger_for(jobs, conn, on_kill_action=action)
    task = asyncio.create_task(first_event(trigger))
    await asyncio.sleep(0.5)
    await trigger.on_kill()
    if expect == "gone":
        wait_until(lambda: _gone(jobs, trigger.name), what="deleted on kill")
        assert (await task).payload["status"] == "error"
    else:
        jobs.wait_phase("GenericJob", trigger.name, "Paused")
        task.cancel()


@pytest.mark.asyncio
async def test_many_triggers_share_one_watch(conn, jobs, controller):
    from airflow_t9k.triggers import shared_watch

    triggers = [_trigger_for(jobs, conn, sim={"sim.t9k.test/duration": "2s"}) for _ in range(1)]
    # more jobs of the same kind in the same namespace, from different runs
    for i in range(4):
        with pytest.raises(TaskDeferred) as exc:
            make_op(sim={"sim.t9k.test/duration": "2s"}, deferrable=True, log_events=False).execute(
                context(run_id=f"manual__{i + 10}")
            )
        triggers.append(exc.value.trigger)
    tasks = [asyncio.create_task(first_event(t)) for t in triggers]
    await asyncio.sleep(0.5)
    assert shared_watch.active_watches() == 2  # one for the jobs, one for Events (the first trigger logs them)
    events = await asyncio.gather(*tasks)
    assert [e.payload["status"] for e in events] == ["success"] * 5
    assert shared_watch.active_watches() == 0


def _sensor(**kw):
    from airflow_t9k.sensors.job import T9kJobSensor

    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return T9kJobSensor(task_id="wait", kind="GenericJob", poke_interval=1, timeout=60, **kw)


def test_sensor_waits_for_success_and_fails_fast_on_another_terminal_phase(conn, jobs, controller):
    ok = make_op(sim={"sim.t9k.test/duration": "1s"}, deferrable=False, wait_for_completion=False).execute(context(run_id="m_ok"))
    bad_sim = {"sim.t9k.test/duration": "1s", "sim.t9k.test/fail-pods": ".*"}
    bad = make_op(sim=bad_sim, deferrable=False, wait_for_completion=False).execute(context(run_id="m_bad"))
    sensor = _sensor(name=ok["name"], namespace=jobs.ns)
    wait_until(lambda: sensor.poke({}), timeout=30, what="sensor sees Succeeded")
    failing = _sensor(name=bad["name"], namespace=jobs.ns)
    jobs.wait_phase("GenericJob", bad["name"], "Failed")
    with pytest.raises(AirflowException, match="ended Failed, not in"):
        failing.poke({})
    by_label = _sensor(label_selector="airflow-t9k.io/run-id=m_ok", namespace=jobs.ns)
    assert by_label.poke({}) is True
    ambiguous = _sensor(label_selector="airflow-t9k.io/dag-id=dag", namespace=jobs.ns)
    with pytest.raises(AirflowException, match="matches 2 jobs"):
        ambiguous.poke({})


def test_sensor_defers_on_a_running_job(conn, jobs, controller):
    ident = make_op(deferrable=False, wait_for_completion=False).execute(context())
    jobs.wait_phase("GenericJob", ident["name"], "Running")
    with pytest.raises(TaskDeferred) as exc:
        _sensor(name=ident["name"], namespace=jobs.ns, deferrable=True).execute({})
    trigger = exc.value.trigger  # deferred at once: it follows the job of that name, whichever it is
    assert (trigger.name, trigger.uid, trigger.policy.wait_for_creation) == (ident["name"], None, True)


def _append_pod_log(cluster, namespace: str, *lines: str) -> None:
    """As if every pod of ``namespace`` printed these lines now, all with the same second (kwok
    serves the namespace's pod-log file, LocalCluster.own_pod_log)."""
    now = datetime.now(timezone.utc)
    cluster.print_to_pods(namespace, "".join(f"{now.strftime('%Y-%m-%dT%H:%M:%S')}.{i:09d}Z stdout F {line}\n"
                                             for i, line in enumerate(lines)))  # fmt: skip


@pytest.mark.asyncio
async def test_trigger_streams_new_replica_log_lines_once_each(conn, cluster, jobs, controller, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    # Every replica (the default follows only the deciding one: test_logs_both_modes.py).
    trigger = _trigger_for(jobs, conn, sim={"sim.t9k.test/duration": "6s"}, log_events=False, log_replicas="all")
    task = asyncio.create_task(first_event(trigger))
    jobs.wait_phase("GenericJob", trigger.name, "Running")
    await asyncio.sleep(1.5)  # followers attach to the running replicas
    marker = uuid.uuid4().hex[:8]
    _append_pod_log(cluster, jobs.ns, f"epoch 1 loss 0.9 {marker}", f"epoch 2 loss 0.5 {marker}")
    assert (await task).payload["status"] == "success"
    forwarded = [line for line in capsys.readouterr().out.splitlines() if marker in line]
    for pod in (f"{trigger.name}-worker-0", f"{trigger.name}-worker-1"):
        mine = [line.split("[info     ] ", 1)[1].split(" [airflow_t9k", 1)[0].strip() for line in forwarded if f"[{pod}]" in line]
        assert mine == [f"[{pod}] epoch 1 loss 0.9 {marker}", f"[{pod}] epoch 2 loss 0.5 {marker}"], forwarded


@pytest.mark.asyncio
async def test_trigger_log_streaming_is_bounded(conn, cluster, jobs, controller, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    trigger = _trigger_for(jobs, conn, sim={"sim.t9k.test/duration": "5s"}, log_events=False)
    trigger.forwarding = replace(trigger.forwarding, max_log_lines=3)
    task = asyncio.create_task(first_event(trigger))
    jobs.wait_phase("GenericJob", trigger.name, "Running")
    await asyncio.sleep(1.5)
    marker = uuid.uuid4().hex[:8]
    _append_pod_log(cluster, jobs.ns, *[f"line {i} {marker}" for i in range(5)])
    await task
    messages = capsys.readouterr().out.splitlines()
    stop = next(i for i, m in enumerate(messages) if "forwarded 3 log lines; not forwarding more" in m)
    assert sum(marker in m for m in messages[:stop]) == 3  # the budget: three lines as they were written
    # Then, at the job's end, the last lines not forwarded, under their own header (issue 44, item 7).
    assert any("after max_log_lines=3 ran out" in m for m in messages[stop:]), messages[stop:]
    for i in range(5):
        assert sum(f"line {i} {marker}" in m for m in messages) == 1, [m for m in messages if marker in m]


def test_hook_lists_a_jobs_replica_pods_and_its_events(conn, jobs, controller):
    from airflow_t9k.hooks.t9k import T9kHook

    ident = make_op(deferrable=False, wait_for_completion=False).execute(context())
    jobs.wait_phase("GenericJob", ident["name"], "Running")
    hook = T9kHook(kubernetes_conn_id="kubernetes_default")
    pods = hook.list_replica_pods(ident["name"], jobs.ns)
    assert sorted(p["metadata"]["name"] for p in pods) == [f"{ident['name']}-worker-0", f"{ident['name']}-worker-1"]
    wait_until(lambda: {"Pending", "Running"} <= {e["reason"] for e in hook.list_events(ident["name"], jobs.ns)},
               what="the job's phase Events")  # fmt: skip
    assert hook.list_replica_pods("no-such-job", jobs.ns) == []
