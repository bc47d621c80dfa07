"""The triggerer SIGKILLed while T9K_CHAOS_DEFERRED tasks are deferred on their T9k jobs.

A real Airflow (api-server, scheduler, dag-processor, triggerer on SQLite), the bundled
controller and the local cluster. Every task has submitted its job and deferred, and every
trigger is running, when the triggerer's whole process group is SIGKILLed. It is started
again, takes the orphaned triggers over, and every task ends as its job did, on its first
try. The jobs' pods run until the test releases them (kwok ends a pod once it has a
`sim.t9k.test/duration`), so when the jobs end does not hang on how fast the tasks deferred.
Round one: jobs that succeed, released once the restarted triggerer owns every trigger, so
they all end while it watches. Round two: jobs that fail, released while no triggerer runs,
which stays down until the first has ended. No job is submitted twice: jobs are counted from
a watch (a new uid is a new submission) and listed by the labels the operator sets.

Then two triggerer faults that are not kills, on the same Airflow: a triggerer frozen (SIGSTOP)
until a second one takes its triggers, then thawed (issue 44, item 1), and a triggerer whose
identity may not read the jobs (issue 44, item 2).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from airflow_t9k.api.outcome import interpret
from tests.support.airflow import AirflowStack
from tests.support.cluster import wait_until
from tests.support.controller import ControllerProcess
from tests.support.kubelet import release_pods

DAGS = Path(__file__).resolve().parent / "dags"
N = int(os.environ.get("T9K_CHAOS_DEFERRED", "10"))
# How long a released pod still runs: kwok's stage delay, from the annotation's update.
RELEASED_RUNS_FOR = "1s"
# How long a silent triggerer is taken for alive (Airflow's default 30 s): its triggers move
# to another triggerer only after this, so it bounds the recovery the test waits for.
HEALTH_THRESHOLD = 10
LABEL = "airflow-t9k.io"
GROUP, VERSION, PLURAL = "batch.tensorstack.dev", "v1beta1", "genericjobs"


class JobWatch:
    """Every GenericJob ADDED (one uid = one submission), by its task; when each first ended.

    The API server may be restarted by other fault tests sharing the cluster: a watch that
    breaks or expires is followed by a fresh LIST, so no job that exists goes unseen."""

    def __init__(self, api: client.CustomObjectsApi, namespace: str) -> None:
        self.api, self.ns = api, namespace
        self.uids: dict[tuple[str, str], set[str]] = defaultdict(set)  # (run id, task id) -> uids
        self.ended: dict[str, tuple[float, str]] = {}  # uid -> (wall time first seen ended, phase)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._list(),), daemon=True)
        self._thread.start()

    def _list(self) -> str:
        listed = self.api.list_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL)
        for job in listed["items"]:
            self._seen(job)
        return listed["metadata"]["resourceVersion"]

    def _run(self, rv: str | None) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                rv = rv or self._list()
                for ev in w.stream(self.api.list_namespaced_custom_object, GROUP, VERSION, self.ns, PLURAL,
                                   resource_version=rv, timeout_seconds=5):  # fmt: skip
                    if ev["type"] == "ERROR":  # 410 Gone: the version is too old; list again
                        rv = None
                        break
                    self._seen(ev["object"])
                    rv = ev["object"]["metadata"]["resourceVersion"]
                    if self._stop.is_set():
                        break
            except Exception:  # noqa: BLE001 - the API server is away: list again once it answers
                rv = None
                self._stop.wait(0.5)
            finally:
                w.stop()

    def _seen(self, job: dict) -> None:
        meta = job["metadata"]
        notes = meta.get("annotations") or {}
        self.uids[(notes.get(f"{LABEL}/run-id", "?"), notes.get(f"{LABEL}/task-id", "?"))].add(meta["uid"])
        state = interpret(job)
        if state.terminal and meta["uid"] not in self.ended:
            self.ended[meta["uid"]] = (time.time(), state.phase or "")

    def of_run(self, run_id: str) -> dict[str, set[str]]:
        return {task: uids for (run, task), uids in list(self.uids.items()) if run == run_id}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture(scope="module")
def stack(cluster, api_client, crds, tmp_path_factory) -> Iterator[tuple[AirflowStack, str, JobWatch]]:
    core = client.CoreV1Api(api_client)
    ns = f"t9k-chaos-trig-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns, "labels": {"airflow-t9k/test": "true"}}})
    wait_until(lambda: bool(core.list_namespaced_service_account(ns).items), what="default serviceaccount")
    home = tmp_path_factory.mktemp("airflow-chaos-triggerer")
    controller = ControllerProcess(cluster.kubeconfig, ns, home).start()
    env = {"T9K_CHAOS_DEFERRED": str(N), "AIRFLOW__CORE__PARALLELISM": str(N),
           "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": str(HEALTH_THRESHOLD)}  # fmt: skip
    airflow = AirflowStack(home, cluster.kubeconfig, ns, dags=DAGS, env=env)
    jobs = JobWatch(client.CustomObjectsApi(api_client), ns)
    try:
        # WAL: a frozen triggerer (test_a_frozen_triggerer_...) must not hold SQLite's database lock
        # from every other component, as a reader's open transaction does in rollback-journal mode.
        # PostgreSQL, as deployed, never did.
        airflow.start(prepare=lambda: _wal(home / "airflow.db"))
        yield airflow, ns, jobs
    finally:
        jobs.stop()
        for name in list(airflow.procs):  # nothing to shut down cleanly for: saves the 10-15 s of a graceful stop
            airflow.kill(name)
        controller.stop()
        core.delete_namespace(ns)


def _wal(db: Path) -> None:
    import sqlite3

    with sqlite3.connect(db) as conn:
        assert conn.execute("pragma journal_mode=wal").fetchone() == ("wal",)


def _triggers(airflow: AirflowStack, dag_id: str, run_id: str) -> list[tuple[str, str, int | None]]:
    """(task id, state, triggerer job id of its trigger) for every task of the run."""
    return airflow._query(
        "select ti.task_id, ti.state, t.triggerer_id from task_instance ti left join trigger t on t.id = ti.trigger_id "
        "where ti.dag_id = ? and ti.run_id = ?", dag_id, run_id)  # fmt: skip


def _utc(stamp: str) -> float:
    dt = datetime.fromisoformat(stamp)
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


# The jobs that succeed end while the restarted triggerer watches; for the jobs that fail the
# triggerer stays down until the first has ended, so those end while no triggerer runs.
# Before its release no job can end, however long the tasks took to defer.
@pytest.mark.parametrize(("outcome", "phase", "down_until_an_end"), [("success", "Succeeded", False), ("failed", "Failed", True)])
def test_triggerer_sigkill_with_deferred_tasks(stack, api_client, outcome: str, phase: str, down_until_an_end: bool,
                                               figures) -> None:  # fmt: skip
    airflow, ns, jobs = stack
    dag_id = f"t9k_chaos_deferred_{outcome}"
    started = time.monotonic()
    run_id = airflow.trigger(dag_id)

    def all_watched() -> bool:
        rows = _triggers(airflow, dag_id, run_id)
        if len(rows) != N or any(state != "deferred" or who is None for _, state, who in rows):
            return False
        log = airflow.task_log(dag_id, run_id)  # each trigger has logged its job's phase: it runs
        names = _names(api_client, ns, run_id)
        return len(names) == N and all(f"/{next(iter(n))}: phase" in log for n in names.values())

    wait_until(all_watched, timeout=120, interval=0.5, what=f"{N} tasks deferred, each trigger running")
    deferred_after = time.monotonic() - started
    assert not _ended(jobs, run_id), "a job ended before its release"
    old = {who for _, _, who in _triggers(airflow, dag_id, run_id)}

    airflow.kill("triggerer")
    killed_at = time.monotonic()
    if down_until_an_end:
        _release(api_client, ns, run_id)
        wait_until(lambda: _ended(jobs, run_id), timeout=60, interval=0.2, what="a job to end")
    assert {state for _, state, _ in _triggers(airflow, dag_id, run_id)} == {"deferred"}
    airflow.launch("triggerer")

    def taken_over() -> bool:
        rows = _triggers(airflow, dag_id, run_id)
        return all(state != "deferred" or (who is not None and who not in old) for _, state, who in rows)

    wait_until(taken_over, timeout=HEALTH_THRESHOLD + 60, interval=0.5, what="a new triggerer owns every trigger")
    takeover, takeover_wall = time.monotonic() - killed_at, time.time()
    if not down_until_an_end:
        _release(api_client, ns, run_id)
    tis = wait_until(lambda: _final(airflow, dag_id, run_id), timeout=120, interval=0.5,
                     what=f"every task of {dag_id} ended")  # fmt: skip

    submitted = jobs.of_run(run_id)
    listed = _names(api_client, ns, run_id)
    run_jobs = {u for uids in submitted.values() for u in uids}
    wait_until(lambda: run_jobs <= set(jobs.ended), timeout=10, what="the watch saw every job end")
    ended_while_down = sum(1 for u in run_jobs if jobs.ended[u][0] < takeover_wall)
    last_job_end = max(jobs.ended[u][0] for u in run_jobs)
    last_task_end = max(_utc(end) for _, _, end in tis.values())
    duplicates = sum(len(u) - 1 for u in submitted.values()) + sum(len(n) - 1 for n in listed.values())
    figures(f"deferred={N} kills=1 all_deferred_after={deferred_after:.1f}s takeover_after_kill={takeover:.1f}s "
            f"jobs_ended_before_takeover={ended_while_down} last_job_end_to_last_task_end={last_task_end - last_job_end:.1f}s "
            f"duplicates={duplicates} round={time.monotonic() - started:.1f}s")  # fmt: skip

    assert {t: s for t, (s, _, _) in tis.items() if s != outcome} == {}, tis
    assert {t: n for t, (_, n, _) in tis.items() if n != 1} == {}, "a task was retried"
    assert sorted(submitted) == sorted(listed) == [f"job_{i:02d}" for i in range(N)]
    assert {t: u for t, u in submitted.items() if len(u) != 1} == {}, "a job was submitted twice"
    assert {t: n for t, n in listed.items() if len(n) != 1} == {}, "two jobs carry one task's labels"
    assert {jobs.ended[u][1] for u in run_jobs} == {phase}
    assert ended_while_down > 0 if down_until_an_end else ended_while_down == 0  # the round tested what it says


def _ended(jobs: JobWatch, run_id: str) -> list[str]:
    return [u for uids in jobs.of_run(run_id).values() for u in uids if u in jobs.ended]


def _release(api_client, ns: str, run_id: str) -> None:
    """Let every pod of the run's jobs end, RELEASED_RUNS_FOR after this."""
    names = [n for job_names in _names(api_client, ns, run_id).values() for n in job_names]
    assert len(names) == N, names
    release_pods(client.CoreV1Api(api_client), ns, names, after=RELEASED_RUNS_FOR)


def _names(api_client, ns: str, run_id: str) -> dict[str, set[str]]:
    """The jobs that carry the run's labels, by the task-id label. Other fault tests may be
    restarting the shared API server: asked again until it answers."""
    api = client.CustomObjectsApi(api_client)

    def attempt() -> tuple[list[dict]] | None:
        try:
            return (
                api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, label_selector=f"{LABEL}/run-id={run_id}")["items"],
            )
        except (ApiException, HTTPError) as exc:
            if isinstance(exc, ApiException) and 0 < (exc.status or 0) < 500:
                raise
            return None

    (items,) = wait_until(attempt, timeout=60, interval=0.5, what="the API server to answer")
    out: dict[str, set[str]] = defaultdict(set)
    for job in items:
        out[job["metadata"]["labels"][f"{LABEL}/task-id"]].add(job["metadata"]["name"])
    return dict(out)


def _final(airflow: AirflowStack, dag_id: str, run_id: str) -> dict[str, tuple[str | None, int, str | None]] | None:
    tis = airflow.tis(dag_id, run_id)
    done = len(tis) == N and all(s in ("success", "failed", "upstream_failed", "skipped") and end for s, _, end in tis.values())
    return tis if done else None


# -- not kills: a trigger that moved, and a trigger that errs ----------------------------------
def _alive_triggerers(airflow: AirflowStack, within: float = 5.0) -> set[int]:
    rows = airflow._query("select id, latest_heartbeat from job where job_type = 'TriggererJob' and state = 'running'")
    return {i for i, beat in rows if beat and time.time() - _utc(beat) < within}


def _jobs_of(api_client, ns: str, run_id: str) -> dict[str, dict]:
    api = client.CustomObjectsApi(api_client)
    items = api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, label_selector=f"{LABEL}/run-id={run_id}")["items"]
    return {j["metadata"]["labels"][f"{LABEL}/task-id"]: j for j in items}


def test_a_frozen_triggerer_leaves_the_jobs_it_lost_to_another_running(stack, api_client, figures) -> None:
    """Issue 44, item 1. A triggerer frozen (SIGSTOP) past ``triggerer_health_check_threshold``
    while its tasks are deferred loses their triggers to a second triggerer; thawed, Airflow 3.3.2
    cancels the triggers it no longer owns as a user's kill would, and calls ``on_kill``. The
    tasks are still deferred, so the trigger leaves the jobs alone: they keep running (not
    deleted, not paused) and each task ends in success on its first try."""
    airflow, ns, _jobs = stack
    dag_id = "t9k_chaos_moved"
    tasks = {"on_kill_delete", "on_kill_pause"}
    first = "triggerer"
    (first_id,) = wait_until(lambda: _alive_triggerers(airflow, within=8.0) or None, timeout=60, interval=0.5,
                             what="one triggerer heartbeating")  # fmt: skip
    run_id = airflow.trigger(dag_id)

    def watched_by_first() -> bool:
        rows = _triggers(airflow, dag_id, run_id)
        if len(rows) != len(tasks) or any(state != "deferred" or who != first_id for _, state, who in rows):
            return False
        return _trigger_log(airflow, dag_id, run_id).count(": phase") >= len(tasks)  # each trigger has seen its job

    wait_until(watched_by_first, timeout=120, interval=0.5, what="both tasks deferred, watched by the first triggerer")
    before = {t: j["metadata"]["uid"] for t, j in _jobs_of(api_client, ns, run_id).items()}
    assert set(before) == tasks

    airflow.launch("triggerer-2")
    (second_id,) = wait_until(lambda: _alive_triggerers(airflow, within=8.0) - {first_id} or None, timeout=90, interval=0.5,
                              what="a second triggerer heartbeating")  # fmt: skip
    assert watched_by_first(), "the second triggerer took a trigger of a live one"
    airflow.freeze(first)
    frozen_at = time.monotonic()
    try:

        def moved() -> bool:
            return all(state == "deferred" and who == second_id for _, state, who in _triggers(airflow, dag_id, run_id))

        wait_until(moved, timeout=HEALTH_THRESHOLD + 60, interval=0.5, what="the second triggerer owns both triggers")
        moved_after = time.monotonic() - frozen_at
        # The second triggerer runs the triggers (each logs its job's phase again) before the first wakes.
        wait_until(lambda: _trigger_log(airflow, dag_id, run_id).count(": phase") >= 2 * len(tasks), timeout=60,
                   interval=0.5, what="the second triggerer running both triggers")  # fmt: skip
    finally:
        airflow.thaw(first)

    # Thawed, the first triggerer cancels the triggers it lost, and their on_kill reads the task's state.
    said = "the task is still deferred: this triggerer lost the trigger to another one"
    acted = ("deleted GenericJob", "paused GenericJob")

    def killed() -> str | None:
        log = _trigger_log(airflow, dag_id, run_id)
        return log if log.count(said) >= len(tasks) or any(a in log for a in acted) else None

    log = wait_until(killed, timeout=90, interval=0.5, what="the thawed triggerer's on_kill of both triggers")
    assert not any(a in log for a in acted), log[-4000:]
    now = _jobs_of(api_client, ns, run_id)
    assert {t: j["metadata"]["uid"] for t, j in now.items()} == before, "a job was deleted (or replaced)"
    assert {t: (j["spec"].get("runMode") or {}).get("pause", {}).get("enabled") for t, j in now.items()} == {
        t: None for t in tasks
    }, "a job was paused"
    assert {t: interpret(j).phase for t, j in now.items()} == {t: "Running" for t in tasks}
    assert {who for _, _, who in _triggers(airflow, dag_id, run_id)} == {second_id}  # still watched, by the second

    release_pods(client.CoreV1Api(api_client), ns, [j["metadata"]["name"] for j in now.values()], after=RELEASED_RUNS_FOR)

    def ended() -> dict | None:
        tis = airflow.tis(dag_id, run_id)
        return tis if len(tis) == len(tasks) and all(s in ("success", "failed") for s, _, _ in tis.values()) else None

    tis = wait_until(ended, timeout=120, interval=0.5, what="both tasks ended")
    figures(f"frozen triggerer: triggers moved {moved_after:.1f}s after the freeze (threshold {HEALTH_THRESHOLD}s); "
            f"on thawing it cancelled them and kept both jobs")  # fmt: skip
    assert {t: (s, n) for t, (s, n, _) in tis.items()} == {t: ("success", 1) for t in tasks}
    airflow.kill("triggerer-2")


def _trigger_log(airflow: AirflowStack, dag_id: str, run_id: str) -> str:
    """What the run's triggers wrote, by the triggerers that ran them (``attempt=N.log.trigger.<job>.log``)."""
    files = (airflow.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}").glob("task_id=*/attempt=*.log.trigger.*.log")
    return "".join(f.read_text(errors="replace") for f in files)


def test_a_trigger_error_with_delete_always_leaves_a_running_job(stack, cluster, api_client, tmp_path) -> None:
    """Issue 44, item 2. A triggerer that may not read the job (a broken Role: 403) ends the wait
    with an ``error`` event; the task, with ``delete_on_finish="always"``, fails, and its running
    job stays (the worker reads it again and finds it running) for a retry to reattach to."""
    from tests.support.rbac import token_kubeconfig

    airflow, ns, _jobs = stack
    blind = token_kubeconfig(api_client, cluster.kubeconfig, ns, "blind-triggerer",
                             [{"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]}],
                             tmp_path / "blind-kubeconfig")  # fmt: skip
    conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(blind), "namespace": ns}}
    airflow.terminate("triggerer", grace=10)
    airflow.launch("triggerer", env={"AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(conn)})
    dag_id = "t9k_chaos_trigger_error"
    run_id = airflow.trigger(dag_id)
    state, tries = wait_until(lambda: (s := airflow.ti(dag_id, run_id))[0] in ("failed", "success") and s,
                              timeout=150, interval=0.5, what="the task ended")  # fmt: skip
    log = airflow.task_log(dag_id, run_id)
    assert (state, tries) == ("failed", 1), log[-4000:]
    assert "forbidden" in log.lower(), log[-4000:]  # the trigger's error: the triggerer may not read the job
    jobs = _jobs_of(api_client, ns, run_id)
    assert set(jobs) == {"job"}, "the running job was deleted after the trigger's error"
    assert interpret(jobs["job"]).phase in ("Running", "Pending", "Created"), jobs["job"].get("status")
    assert "not deleting GenericJob" in log, log[-4000:]
    assert "the retry reattaches to it" in log, log[-4000:]
