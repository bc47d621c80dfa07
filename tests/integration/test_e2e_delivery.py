"""Retries under a real Airflow (scheduler, LocalExecutor workers, triggerer) and the local
cluster: a training that succeeded is never run again (issue 28, point 1).

- an Airflow identity that may not delete jobs, with ``delete_on_finish="on_success"`` and
  retries: the clean-up's 403 is a warning, the task succeeds on its first try with the job's
  result, and the namespace holds one job (it used to fail each try after marking the job
  consumed, so each retry trained again under ``-t<try>``).
- a job that ends a second after its task deferred: the real triggerer holds the event until
  ``[t9k] deferral_hold_seconds`` after the deferral (point 4, apache/airflow#72716);
- a deferrable sensor on a job that has already ended ends on the worker, never deferred;
- a trigger row a newer worker wrote (a field and a record this version does not know, a higher
  ``version``) loads on this triggerer with a warning, and its task goes on (point 6);
- a triggerer restart resumes a replica's log where the trigger left it (its XCom
  ``t9k_log_cursor``), not from the deferral: each line reaches the task log once (point 7);
- a deferred TIJobOperator's XCom ``ti_state`` reads ``Running`` while its job runs, written by the
  trigger with the task still deferred (issue 47, item 5);
- one run id run three times (deleted and triggered again): each run submits its job under the
  next free name instead of failing on the third (point 7).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from kubernetes import client

from tests.support.airflow import AIRFLOW, AirflowStack
from tests.support.cluster import wait_until
from tests.support.controller import ControllerProcess
from tests.support.kubelet import release_pods
from tests.support.rbac import airflow_rules, token_kubeconfig

DAGS = Path(__file__).resolve().parent / "e2e_delivery_dags"


@pytest.fixture(scope="module")
def e2e(cluster, api_client, crds, tmp_path_factory) -> Iterator[tuple[AirflowStack, str]]:
    core = client.CoreV1Api(api_client)
    ns = f"t9k-deliver-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_until(lambda: bool(core.list_namespaced_service_account(ns).items), what="default serviceaccount")
    cluster.own_pod_log(ns)
    home = tmp_path_factory.mktemp("airflow-e2e-delivery")
    rules = airflow_rules(("create", "get", "list", "watch", "patch"))  # no delete
    no_delete = token_kubeconfig(api_client, cluster.kubeconfig, ns, "no-delete", rules, home / "no-delete-kubeconfig")
    controller = ControllerProcess(cluster.kubeconfig, ns, home).start()
    stack = AirflowStack(home, cluster.kubeconfig, ns, dags=DAGS, env={"T9K_E2E_NO_DELETE_KUBECONFIG": str(no_delete)})
    try:
        stack.start()
        yield stack, ns
    finally:
        stack.stop()
        controller.stop()
        core.delete_namespace(ns)


def _jobs(api_client, ns: str, run_id: str) -> list[dict]:
    items = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", ns, "genericjobs"
    )["items"]
    return [j for j in items if j["metadata"]["annotations"].get("airflow-t9k.io/run-id") == run_id]


def _xcom(stack: AirflowStack, dag_id: str, run_id: str, key: str, task_id: str = "train") -> object:
    entry = stack.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}")
    value = entry["value"]
    if not isinstance(value, str):
        return value
    try:  # a structured value may come back as its JSON text; a plain string comes back as itself
        return json.loads(value)
    except ValueError:
        return value


def test_an_identity_that_may_not_delete_ends_with_one_job_and_its_result(e2e, api_client):
    stack, ns = e2e
    run_id = stack.trigger("t9k_no_delete")
    states = stack.states_until("t9k_no_delete", run_id, {"success", "failed"}, timeout=240)
    log = stack.task_log("t9k_no_delete", run_id)
    assert states[-1] == "success", (states, log[-4000:])
    assert stack.ti("t9k_no_delete", run_id)[1] == 1  # no retry was needed
    jobs = _jobs(api_client, ns, run_id)
    assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
    assert jobs[0]["metadata"]["annotations"]["airflow-t9k.io/delivered-by-try"] == "1"
    assert _xcom(stack, "t9k_no_delete", run_id, "result") == {"metric": 0.77}
    assert "could not delete GenericJob" in log, log[-4000:]
    assert "may not delete genericjobs.batch.tensorstack.dev" in log, log[-4000:]


def test_an_event_within_seconds_of_the_deferral_is_held(e2e):
    stack, _ = e2e
    run_id = stack.trigger("t9k_hold")
    states = stack.states_until("t9k_hold", run_id, {"success", "failed"}, timeout=180)
    log = stack.task_log("t9k_hold", run_id)
    assert states[-1] == "success", (states, log[-4000:])
    assert "the event came within 10s of the deferral ([t9k] deferral_hold_seconds): holding it" in log, log[-4000:]


def test_a_deferrable_sensor_on_an_ended_job_ends_on_the_worker(e2e):
    stack, _ = e2e
    run_id = stack.trigger("t9k_sensor_done")
    wait_until(lambda: stack.tis("t9k_sensor_done", run_id).get("wait", (None,))[0] in ("success", "failed"), timeout=180,
               interval=1, what="the sensor ended")  # fmt: skip
    assert stack.tis("t9k_sensor_done", run_id)["wait"][:2] == ("success", 1)
    sensor_log = "".join(
        f.read_text() for f in (stack.home / "logs" / "dag_id=t9k_sensor_done" / f"run_id={run_id}").glob("task_id=wait/*.log")
    )
    assert "GenericJob" in sensor_log, sensor_log[-3000:]
    assert "Pausing task as DEFERRED" not in sensor_log, sensor_log[-3000:]


def test_a_deferred_ti_jobs_state_reads_running_while_it_runs_without_a_resume(e2e, api_client):
    # Before issue 47 (item 5) ti_state was written when the job was submitted (Created) and at its end.
    stack, ns = e2e
    run_id = stack.trigger("t9k_ti_running")
    wait_until(lambda: stack.ti("t9k_ti_running", run_id)[0] == "deferred", timeout=120, interval=0.5, what="deferred")
    api = client.CustomObjectsApi(api_client)

    def running() -> list[str]:
        items = api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "tensorflowtrainingjobs")["items"]
        return [j["metadata"]["name"] for j in items if j["metadata"]["annotations"].get("airflow-t9k.io/run-id") == run_id
                and (j.get("status") or {}).get("phase") == "Running"]  # fmt: skip

    names = wait_until(running, timeout=60, what="the TI job running")

    def state() -> object:
        try:
            return _xcom(stack, "t9k_ti_running", run_id, "ti_state")
        except Exception:  # noqa: BLE001 - not readable yet
            return None

    seen: list[object] = []
    try:
        wait_until(lambda: seen.append(state()) or seen[-1] == "Running", timeout=30, interval=1, what="ti_state Running")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; read: {seen[-3:]}") from None
    assert stack.ti("t9k_ti_running", run_id)[0] == "deferred"  # written from the triggerer: no resume
    release_pods(client.CoreV1Api(api_client), ns, names)
    states = stack.states_until("t9k_ti_running", run_id, {"success", "failed"}, timeout=180)
    log = stack.task_log("t9k_ti_running", run_id)
    assert states[-1] == "success", (states, log[-4000:])
    assert _xcom(stack, "t9k_ti_running", run_id, "ti_state") == "Succeeded"


# A newer worker's row: a field the WaitPolicy does not know, a record of its own, a higher version.
REWRITE = """
from airflow.models.trigger import Trigger
from airflow.utils.session import create_session
from sqlalchemy import select

with create_session() as session:
    rows = [t for t in session.scalars(select(Trigger)) if t.classpath.endswith("T9kJobTrigger")]
    assert len(rows) == 1, rows
    kwargs = rows[0].kwargs
    kwargs["policy"] = {**kwargs["policy"], "retry_budget": 3}
    kwargs["tracing"] = {"span": "abc"}
    kwargs["version"] = 5
    rows[0].kwargs = kwargs
"""


def test_a_trigger_row_a_newer_worker_wrote_loads_on_this_triggerer_with_a_warning(e2e):
    stack, _ = e2e
    stack.terminate("triggerer")
    try:
        run_id = stack.trigger("t9k_upgrade")
        wait_until(lambda: stack.ti("t9k_upgrade", run_id)[0] == "deferred", timeout=120, interval=0.5, what="deferred")
        python = str(Path(AIRFLOW).parent / "python")
        out = subprocess.run([python, "-c", REWRITE], env=stack.env, capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        stack.launch("triggerer")
    states = stack.states_until("t9k_upgrade", run_id, {"success", "failed"}, timeout=180)
    log = stack.task_log("t9k_upgrade", run_id)
    assert states[-1] == "success", (states, log[-4000:])
    assert "T9kJobTrigger written by version 5 of airflow-t9k (this triggerer runs version 4); ignored: " in log, log[-4000:]
    assert "WaitPolicy fields retry_budget" in log, log[-4000:]
    assert "key 'tracing'" in log, log[-4000:]


def _append_lines(cluster, namespace: str, *lines: str) -> list[str]:
    """Lines printed by ``namespace``'s pods, each with its own stamp; the stamps."""
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    stamps = [f"{now}.{i + 1:09d}Z" for i in range(len(lines))]
    cluster.print_to_pods(namespace, "".join(f"{stamp} stdout F {line}\n" for stamp, line in zip(stamps, lines, strict=True)))
    return stamps


def _nanoseconds(stamp: str) -> int:
    """An RFC 3339 stamp with nanoseconds ("...T10:00:00.000000001Z") as nanoseconds since the epoch."""
    from datetime import datetime

    seconds, fraction = stamp.rstrip("Z").split(".")
    return int(datetime.fromisoformat(seconds + "+00:00").timestamp()) * 1_000_000_000 + int(fraction)


def _cursor(stack: AirflowStack, dag_id: str, run_id: str) -> dict:
    try:
        return _xcom(stack, dag_id, run_id, "t9k_log_cursor") or {}  # type: ignore[return-value]
    except Exception:  # noqa: BLE001 - not written yet (404)
        return {}


def _lines_on_record(stack: AirflowStack, cluster, api_client, ns: str, dag_id: str, marker: str) -> tuple[str, list[str]]:
    """A run of ``dag_id`` deferred, its job running, three lines of its replica forwarded and
    the trigger's cursor saved past them: the run id and those lines."""
    run_id = stack.trigger(dag_id)
    wait_until(lambda: stack.ti(dag_id, run_id)[0] == "deferred", timeout=120, interval=0.5, what="deferred")
    wait_until(lambda: any((j.get("status") or {}).get("phase") == "Running" for j in _jobs(api_client, ns, run_id)),
               timeout=60, what="the job running")  # fmt: skip
    time.sleep(3)  # the trigger attaches to the replica's log
    before = [f"before {i} {marker}" for i in range(3)]
    last = _nanoseconds(_append_lines(cluster, ns, *before)[-1])
    # The trigger saved where the log stands (every 5 s while it moves).
    wait_until(lambda: any(c.get("at") == last for c in _cursor(stack, dag_id, run_id).values()),
               timeout=30, interval=1, what="the log cursor saved")  # fmt: skip
    return run_id, before


def _each_once(stack: AirflowStack, dag_id: str, run_id: str, lines: list[str]) -> None:
    states = stack.states_until(dag_id, run_id, {"success", "failed"}, timeout=180)
    log = stack.task_log(dag_id, run_id)
    assert states[-1] == "success", (states, log[-4000:])
    for line in lines:
        assert log.count(line) == 1, (line, log.count(line), log[-4000:])


def test_a_triggerer_restart_resumes_the_log_where_it_was(e2e, cluster, api_client):
    stack, ns = e2e
    marker = uuid.uuid4().hex[:8]
    run_id, before = _lines_on_record(stack, cluster, api_client, ns, "t9k_log_resume", marker)
    stack.terminate("triggerer")
    stack.launch("triggerer")
    wait_until(stack.healthy, timeout=60, interval=1, what="the triggerer back")
    time.sleep(5)  # the new triggerer picks the trigger up and attaches again
    after = [f"after {i} {marker}" for i in range(2)]
    _append_lines(cluster, ns, *after)
    names = [j["metadata"]["name"] for j in _jobs(api_client, ns, run_id)]
    release_pods(client.CoreV1Api(api_client), ns, names, after="3s")  # the job ends once those lines are out
    _each_once(stack, "t9k_log_resume", run_id, before + after)


def test_lines_written_before_the_job_ended_while_no_triggerer_ran_reach_the_log(e2e, cluster, api_client):
    """The job writes its last lines and ends while no triggerer runs: the next triggerer finds it
    ended, with no replica running to follow, and still forwards those lines, once."""
    stack, ns = e2e
    marker = uuid.uuid4().hex[:8]
    run_id, before = _lines_on_record(stack, cluster, api_client, ns, "t9k_log_end_down", marker)
    stack.terminate("triggerer")
    time.sleep(1.1)  # the next lines' stamps fall in a later second than the cursor's
    after = [f"after {i} {marker}" for i in range(2)]
    _append_lines(cluster, ns, *after)
    release_pods(client.CoreV1Api(api_client), ns, [j["metadata"]["name"] for j in _jobs(api_client, ns, run_id)])
    wait_until(lambda: [(j.get("status") or {}).get("phase") for j in _jobs(api_client, ns, run_id)] == ["Succeeded"],
               timeout=60, interval=0.5, what="the job succeeded with no triggerer")  # fmt: skip
    stack.launch("triggerer")
    _each_once(stack, "t9k_log_end_down", run_id, before + after)


def _executor_events(stack: AirflowStack, dag_id: str, run_id: str) -> int:
    """How many executor reports of the task ``train`` of this run the scheduler has received."""
    key = f"TaskInstanceKey(dag_id='{dag_id}', task_id='train', run_id='{run_id}'"
    log = (stack.home / "scheduler.log").read_text(errors="replace")
    return sum(1 for line in log.splitlines() if "Received executor event" in line and key in line)


def test_the_same_run_id_run_three_times_takes_the_next_free_name(e2e, api_client):
    """A run id reused (here the run is deleted and triggered again under the same id; Airflow
    3.3's ``dags test`` makes a new id each time): its task state store is gone with the run,
    the jobs of the earlier runs stay, and each run takes the next free name."""
    stack, ns = e2e
    dag_id, run_id = "t9k_same_run_id", f"fixed-{uuid.uuid4().hex[:6]}"
    wait_until(lambda: stack._dag_known(dag_id), timeout=60, interval=1, what=f"{dag_id} parsed")
    stack._retry_locked(lambda: stack.api("PATCH", f"dags/{dag_id}", {"is_paused": False}))
    for n in range(3):
        if n:
            stack._retry_locked(lambda: stack.api("DELETE", f"dags/{dag_id}/dagRuns/{run_id}"))
            wait_until(lambda: stack.run_state(dag_id, run_id) is None, timeout=60, what="the run deleted")
        stack._retry_locked(lambda: stack.api("POST", f"dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None}))
        states = stack.states_until(dag_id, run_id, {"success", "failed"}, timeout=180)
        assert states[-1] == "success", (n, states, stack.task_log(dag_id, run_id)[-3000:])
        # The task ends before the scheduler marks its run: Airflow deletes only a run that ended (409 before).
        wait_until(lambda: stack.run_state(dag_id, run_id) == "success", timeout=60, what="the run marked success")
        # And the scheduler may mark the run before the executor reports the task's process exit. A
        # report arriving after the run was deleted and made again matches the new run's task (same
        # dag, task, run id and try number) and fails it, queued ("finished with state success, but
        # the task instance's state attribute is queued"): Airflow's race, not ours. Wait for it.
        wait_until(lambda n=n: _executor_events(stack, dag_id, run_id) > n, timeout=60, what="the executor's report of the exit")
    names = sorted(j["metadata"]["name"] for j in _jobs(api_client, ns, run_id))
    assert len(names) == 3, names
    assert names[1:] == [f"{names[0]}-t1", f"{names[0]}-t1-2"], names


# -- overlap= (issue 48, item 3): the job of the run before still runs --------------------------
def _held(stack: AirflowStack, api_client, ns: str, dag_id: str) -> tuple[str, str]:
    """A first run whose job runs (its pod held until released): its run id and job name."""
    run_id = stack.trigger(dag_id)
    wait_until(lambda: stack.ti(dag_id, run_id)[0] == "deferred", timeout=120, interval=0.5, what="deferred")
    names = wait_until(lambda: [j["metadata"]["name"] for j in _jobs(api_client, ns, run_id)], timeout=30, what="its job")
    return run_id, names[0]


def test_overlap_skip_skips_the_next_run_while_the_earlier_job_runs(e2e, api_client):
    stack, ns = e2e
    first, name = _held(stack, api_client, ns, "t9k_overlap_skip")
    second = stack.trigger("t9k_overlap_skip")
    states = stack.states_until("t9k_overlap_skip", second, {"success", "failed", "skipped"}, timeout=120)
    log = stack.task_log("t9k_overlap_skip", second)
    assert states[-1] == "skipped", (states, log[-4000:])
    assert f"overlap='skip': GenericJob {ns}/{name} of run {first} is still Running" in log, log[-4000:]
    assert _jobs(api_client, ns, second) == []  # it trained nothing
    release_pods(client.CoreV1Api(api_client), ns, [name])
    assert stack.states_until("t9k_overlap_skip", first, {"success", "failed"}, timeout=120)[-1] == "success"


def test_overlap_wait_defers_until_the_earlier_job_ends_then_trains(e2e, api_client):
    stack, ns = e2e
    first, name = _held(stack, api_client, ns, "t9k_overlap_wait")
    second = stack.trigger("t9k_overlap_wait")
    wait_until(lambda: stack.ti("t9k_overlap_wait", second)[0] == "deferred", timeout=120, interval=0.5, what="deferred")
    time.sleep(3)  # a moment in which a second job would have been created, were the task not waiting
    assert _jobs(api_client, ns, second) == []
    assert f"overlap='wait': GenericJob {ns}/{name} of run {first} is still Running; waiting until it ends" in (
        stack.task_log("t9k_overlap_wait", second)
    )
    release_pods(client.CoreV1Api(api_client), ns, [name])
    assert stack.states_until("t9k_overlap_wait", first, {"success", "failed"}, timeout=120)[-1] == "success"
    names = wait_until(lambda: [j["metadata"]["name"] for j in _jobs(api_client, ns, second)], timeout=120,
                       what="the second run's job, once the first ended")  # fmt: skip
    release_pods(client.CoreV1Api(api_client), ns, names)
    states = stack.states_until("t9k_overlap_wait", second, {"success", "failed"}, timeout=120)
    log = stack.task_log("t9k_overlap_wait", second)
    assert states[-1] == "success", (states, log[-4000:])
    assert "overlap='wait': no earlier run's job of this task runs" in log, log[-4000:]


def test_overlap_supersede_ends_the_earlier_job_and_trains_the_newer_data(e2e, api_client):
    stack, ns = e2e
    first, name = _held(stack, api_client, ns, "t9k_overlap_supersede")
    second = stack.trigger("t9k_overlap_supersede")
    names = wait_until(lambda: [j["metadata"]["name"] for j in _jobs(api_client, ns, second)], timeout=120,
                       what="the second run's job")  # fmt: skip
    wait_until(lambda: _jobs(api_client, ns, first) == [], timeout=60, what="the first run's job deleted")
    assert stack.states_until("t9k_overlap_supersede", first, {"success", "failed"}, timeout=120)[-1] == "failed"
    release_pods(client.CoreV1Api(api_client), ns, names)
    states = stack.states_until("t9k_overlap_supersede", second, {"success", "failed"}, timeout=120)
    log = stack.task_log("t9k_overlap_supersede", second)
    assert states[-1] == "success", (states, log[-4000:])
    assert f"overlap='supersede': GenericJob {ns}/{name} of run {first} is still Running" in log, log[-4000:]
    assert f"deleted GenericJob {ns}/{name} (on_kill_action='delete')" in log, log[-4000:]


def test_a_task_instances_cost_sums_every_try(e2e, api_client):
    # Issue 48, item 6: "what did this night's retraining cost" is one number, whatever the retries.
    stack, ns = e2e
    run_id = stack.trigger("t9k_cost_tries")
    states = stack.states_until("t9k_cost_tries", run_id, {"success", "failed"}, timeout=240)
    log = stack.task_log("t9k_cost_tries", run_id)
    assert states[-1] == "success", (states, log[-4000:])
    jobs = _jobs(api_client, ns, run_id)
    assert len(jobs) == 2, [j["metadata"]["name"] for j in jobs]  # the failed try's job and the retry's
    assert sorted(j["status"]["phase"] for j in jobs) == ["Failed", "Succeeded"]
    ledgers = [j["status"]["usage"] for j in jobs]
    total = _xcom(stack, "t9k_cost_tries", run_id, "usage")["task_total"]
    assert total["jobs"] == 2
    assert total["tries"] == [1, 2]
    assert total["cpu_seconds"] == pytest.approx(sum(u["cpuSeconds"] for u in ledgers), abs=0.01)
    assert total["wall_seconds"] == pytest.approx(sum(u["wallSeconds"] for u in ledgers), abs=0.01)
    assert total["cpu_seconds"] >= 2 * 2 * 2 * 0.9  # two jobs, 2 cpus, about 2 s each
    assert "this task instance in all: 2 jobs over tries 1, 2:" in log, log[-4000:]


def _report(step: int) -> str:
    return "T9K_PROGRESS " + json.dumps({"step": step, "total_steps": 100000})


def test_a_predicted_overrun_warns_calls_back_once_and_the_task_waits_on(e2e, api_client, cluster):
    # Issue 48, item 4: two reports 10 s apart (the controller's --progress-interval) give a rate, so
    # an ETA of days against the try's 30-minute execution_timeout.
    stack, ns = e2e
    run_id, name = _held(stack, api_client, ns, "t9k_overrun")
    api, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)

    def job() -> dict:
        return api.get_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", ns, "genericjobs", name)

    def step() -> object:
        return ((job().get("status") or {}).get("progress") or {}).get("step")

    assert job()["metadata"]["annotations"]["airflow-t9k.io/deadline-source"] == "the task's execution_timeout"
    _append_lines(cluster, ns, _report(1))
    wait_until(lambda: step() == 1, timeout=60, what="the first report in status.progress")
    time.sleep(10.5)
    _append_lines(cluster, ns, _report(2))
    cond = wait_until(lambda: next((c for c in job()["status"].get("conditions", []) if c["type"] == "PredictedOverrun"), None),
                      timeout=60, what="PredictedOverrun")  # fmt: skip
    assert cond["status"] == "True", cond
    assert "after the task's execution_timeout" in cond["message"], cond
    wait_until(lambda: "OVERRUN-CALLBACK" in stack.task_log("t9k_overrun", run_id), timeout=90, what="the callback, on a worker")
    wait_until(lambda: stack.ti("t9k_overrun", run_id)[0] == "deferred", timeout=60, interval=0.5, what="deferred again")
    events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name},reason=PredictedOverrun").items
    assert [e.type for e in events] == ["Warning"], events
    time.sleep(10.5)
    _append_lines(cluster, ns, _report(3))  # still late: no second callback, no second warning
    wait_until(lambda: step() == 3, timeout=60, what="the third report")
    release_pods(core, ns, [name])
    states = stack.states_until("t9k_overrun", run_id, {"success", "failed"}, timeout=120)
    log = stack.task_log("t9k_overrun", run_id)
    assert states[-1] == "success", (states, log[-4000:])
    assert log.count("OVERRUN-CALLBACK") == 1, log[-4000:]
    assert "OVERRUN-CALLBACK source=the task's execution_timeout" in log, log[-4000:]
    assert log.count("predicted to miss its deadline") == 1, log[-4000:]


def test_cache_delivers_an_earlier_runs_outcome_and_a_clear_trains_again(e2e, api_client):
    # Issue 48, item 5: the second run has the same job and no asset events: nothing is trained.
    stack, ns = e2e
    first = stack.trigger("t9k_cache")
    assert stack.states_until("t9k_cache", first, {"success", "failed"}, timeout=180)[-1] == "success"
    [trained] = _jobs(api_client, ns, first)
    recorded = _xcom(stack, "t9k_cache", first, "t9k_cache")
    assert recorded["job"]["uid"] == trained["metadata"]["uid"], recorded
    assert recorded["result"] == {"metric": 0.91}, recorded
    second = stack.trigger("t9k_cache")
    states = stack.states_until("t9k_cache", second, {"success", "failed"}, timeout=180)
    log = stack.task_log("t9k_cache", second)
    assert states[-1] == "success", (states, log[-4000:])
    assert _jobs(api_client, ns, second) == [], "a cached run submitted a job"
    assert _xcom(stack, "t9k_cache", second, "result") == {"metric": 0.91}
    hit = _xcom(stack, "t9k_cache", second, "t9k_cache")
    assert (hit["hit"], hit["run_id"], hit["key"]) == (True, first, recorded["key"]), hit
    assert f"cache=True: run {first}'s GenericJob {ns}/{trained['metadata']['name']} trained on the same job" in log, log[-4000:]
    assert "busybox named by tag, not digest" in log, log[-4000:]
    stack.clear("t9k_cache", second, ["train"])
    wait_until(lambda: len(_jobs(api_client, ns, second)) == 1, timeout=180, what="the Clear's job")
    states = stack.states_until("t9k_cache", second, {"success", "failed"}, timeout=180)
    log = stack.task_log("t9k_cache", second)
    assert states[-1] == "success", (states, log[-4000:])
    assert "which trains again" in log, log[-4000:]
    assert _xcom(stack, "t9k_cache", second, "t9k_cache")["run_id"] == second  # the latest training is what later runs find


def test_two_promotions_at_once_cannot_both_win(e2e):
    # Issue 48, item 2: the candidates of two runs are ready together; each decision holds 3 s
    # between reading the champion and writing the winner (the DAG's SlowPromote). Run one at a
    # time by Airflow's scheduler, the second compares with the first's winner.
    stack, _ = e2e
    low = stack.trigger("t9k_promote_race", conf={"metric": 0.80})
    high = stack.trigger("t9k_promote_race", conf={"metric": 0.85})
    for run_id in (low, high):
        wait_until(lambda run_id=run_id: stack.tis("t9k_promote_race", run_id).get("promote", (None,))[0] in
                   ("success", "skipped", "failed"), timeout=180, interval=1, what="the promotion decided")  # fmt: skip
    rows = stack._query("select run_id, state, start_date, end_date from task_instance where dag_id = 't9k_promote_race' "
                        "and task_id = 'promote' order by start_date")  # fmt: skip
    assert [r[1] for r in rows] != ["failed"] * 2, rows
    assert rows[0][3] <= rows[1][2], f"the two decisions overlapped: {rows}"  # one at a time
    ((champion,),) = stack._query("select s.value from asset_state_store s join asset a on a.id = s.asset_id "
                                  "where a.uri = 's3://models/t9k-e2e-race' and s.key = 'champion'")  # fmt: skip
    champion = json.loads(champion)
    assert (champion["metric"], champion["run_id"]) == (0.85, high), champion
    decisions = {r: _xcom(stack, "t9k_promote_race", r, "promotion", "promote") for r in (low, high)}
    first = rows[0][0]
    assert decisions[first]["champion_before"] is None  # only the first saw no champion
    second = high if first == low else low
    assert decisions[second]["champion_before"] == decisions[first]["candidate"], decisions
    states = {r[0]: r[1] for r in rows}
    assert states[high] == "success"
    assert states[low] == ("success" if first == low else "skipped"), (first, states)
    events = stack._query("select e.source_run_id from asset_event e join asset a on a.id = e.asset_id "
                          "where a.uri = 's3://models/t9k-e2e-race'")  # fmt: skip
    assert sorted(e[0] for e in events) == sorted(r for r, s in states.items() if s == "success")  # an event per win only


def _champion(stack: AirflowStack, uri: str) -> dict:
    rows = stack._query("select s.value from asset_state_store s join asset a on a.id = s.asset_id "
                        "where a.uri = ? and s.key = 'champion'", uri)  # fmt: skip
    return json.loads(rows[0][0]) if rows else {}


def _promote_state(stack: AirflowStack, dag_id: str, run_id: str) -> str | None:
    return stack.tis(dag_id, run_id).get("promote", (None,))[0]


def _promoted_to(stack: AirflowStack, dag_id: str, metric: float, want: str, timeout: float = 120) -> str:
    run_id = stack.trigger(dag_id, conf={"metric": metric})
    wait_until(lambda: _promote_state(stack, dag_id, run_id) == want, timeout=timeout, interval=1,
               what=f"{dag_id}'s promote {want} for {metric}")  # fmt: skip
    if want == "awaiting_input":
        # Answer only once the scheduler has taken in the parking worker's exit. Airflow 3.3.2 fails a
        # task answered within that window (its executor event finds the resumed task already queued and
        # takes it for a task changed externally); docs/retraining.md says so.
        finished = f"TaskInstance Finished: dag_id={dag_id}, task_id=promote, run_id={run_id},"
        wait_until(lambda: any(finished in line and "state=awaiting_input" in line
                               for line in (stack.home / "scheduler.log").read_text(errors="replace").splitlines()),
                   timeout=60, interval=0.5, what="the scheduler to take in the park")  # fmt: skip
    return run_id


def test_a_close_win_waits_for_a_persons_answer(e2e):
    # Issue 48, item 2: approve_below=0.05. The first candidate is promoted without asking; a win by
    # 0.02 waits in awaiting_input with the comparison on Airflow's Required Actions; meanwhile a
    # clearly better run of the same DAG waits its turn (awaiting_input holds the one instance).
    stack, _ = e2e
    dag, uri = "t9k_promote_approval", "s3://models/t9k_promote_approval"
    first = _promoted_to(stack, dag, 0.80, "success")
    close = _promoted_to(stack, dag, 0.82, "awaiting_input")
    path = f"dags/{dag}/dagRuns/{close}/taskInstances/promote/-1/hitlDetails"
    detail = stack.api("GET", path)
    assert detail["options"] == ["Promote", "Keep the champion"], detail
    assert detail["defaults"] == ["Keep the champion"], detail
    assert "metric 0.8200, champion 0.8000" in detail["subject"], detail
    assert f"| champion | 0.8000 | {first} |" in detail["body"], detail
    later = stack.trigger(dag, conf={"metric": 0.95})
    wait_until(lambda: stack.tis(dag, later).get("candidate", (None,))[0] == "success", timeout=120, interval=1,
               what="the later run's candidate")  # fmt: skip
    wait_until(lambda: _promote_state(stack, dag, later) == "scheduled", timeout=60, interval=1, what="the later promote ready")
    time.sleep(8)  # several scheduler loops: ready, it must still not start while the close win is asked
    assert _promote_state(stack, dag, later) in (None, "scheduled"), stack.tis(dag, later)
    assert _champion(stack, uri)["run_id"] == first
    answered = datetime.now(timezone.utc)
    stack.api("PATCH", path, {"chosen_options": ["Promote"], "params_input": {}})
    # The answer puts the close win back in the queue beside the later run's promote, now also ready;
    # the scheduler takes them one at a time, in either order.
    done = ("success", "skipped", "failed")
    wait_until(lambda: all(_promote_state(stack, dag, r) in done for r in (close, later)), timeout=180, interval=1,
               what="both decisions")  # fmt: skip
    rows = stack._query("select run_id, state, start_date, end_date from task_instance where dag_id = ? and "
                        "task_id = 'promote' and run_id in (?, ?) order by end_date", dag, close, later)  # fmt: skip
    started = {r[0]: datetime.fromisoformat(r[2]).replace(tzinfo=timezone.utc) for r in rows}
    assert started[later] >= answered, f"the later decision started while the close win was asked: {rows}"
    decision = _xcom(stack, dag, close, "promotion", "promote")
    assert decision["approval"]["chosen"] == "Promote", decision
    assert decision["approval"]["by"], decision
    approved = f"approved by {decision['approval']['by']}"
    if rows[0][0] == close:  # promoted as approved, then the later run beat it by 0.13 without a question
        assert [r[1] for r in rows] == ["success", "success"], rows
        assert decision["why"].endswith(approved), decision
        assert _xcom(stack, dag, later, "promotion", "promote")["champion_before_run"] == close  # it saw the approved write
    else:  # the later run took the slot first and beat 0.80: the approval was for a champion no longer there
        assert [r[1] for r in rows] == ["success", "skipped"], rows
        assert f"the champion changed while the approval was pending ({approved})" in decision["why"], decision
        assert "does not beat 0.9500" in decision["why"], decision  # it saw the later run's write
    assert "approval" not in _xcom(stack, dag, later, "promotion", "promote")
    assert (_champion(stack, uri)["run_id"], _champion(stack, uri)["metric"]) == (later, 0.95)
    # A close win the person turns down: skipped, no asset event, the champion stays.
    refused = _promoted_to(stack, dag, 0.96, "awaiting_input")
    stack.api("PATCH", f"dags/{dag}/dagRuns/{refused}/taskInstances/promote/-1/hitlDetails",
              {"chosen_options": ["Keep the champion"], "params_input": {}})  # fmt: skip
    wait_until(lambda: _promote_state(stack, dag, refused) == "skipped", timeout=120, interval=1, what="the refusal")
    assert _champion(stack, uri)["run_id"] == later
    decision = _xcom(stack, dag, refused, "promotion", "promote")
    assert decision["promoted"] is False, decision
    assert "chose 'Keep the champion'" in decision["why"], decision
    events = stack._query("select e.source_run_id from asset_event e join asset a on a.id = e.asset_id where a.uri = ?", uri)
    promoted = [r for r in (first, close, later) if _promote_state(stack, dag, r) == "success"]
    assert sorted(e[0] for e in events) == sorted(promoted)  # an event per promotion only


def test_an_unanswered_close_win_keeps_the_champion_at_its_timeout(e2e):
    stack, _ = e2e
    dag, uri = "t9k_promote_approval_timeout", "s3://models/t9k_promote_approval_timeout"
    first = _promoted_to(stack, dag, 0.50, "success")
    unanswered = _promoted_to(stack, dag, 0.51, "awaiting_input")
    # The scheduler's sweep (every [scheduler] trigger_timeout_check_interval, 15 s) applies the default.
    wait_until(lambda: _promote_state(stack, dag, unanswered) == "skipped", timeout=120, interval=1, what="the timeout's default")
    decision = _xcom(stack, dag, unanswered, "promotion", "promote")
    assert (decision["approval"]["timed_out"], decision["approval"]["by"]) == (True, None), decision
    assert "no answer within 0:00:03; the default is 'Keep the champion'" in decision["why"], decision
    assert _champion(stack, uri)["run_id"] == first
