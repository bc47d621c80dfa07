"""A real Airflow for tests: api-server, scheduler (LocalExecutor), dag-processor and triggerer
on SQLite, each its own process group, so one can be SIGKILLed and started again."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.support.cluster import wait_until
from tests.support.controller import free_port, written_since
from tests.support.locks import file_lock

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW = str(Path(sys.executable).parent / "airflow")
COMPONENTS = ("scheduler", "dag-processor", "triggerer")
E2E_DAGS = ROOT / "tests" / "integration" / "e2e_dags"
# Every process checks at start that the database is migrated (loading all of Alembic's
# revisions): each database here was migrated a moment before, from one template.
NO_MIGRATION_CHECK = {"AIRFLOW__DATABASE__CHECK_MIGRATIONS": "False"}
# `airflow scheduler`, run by its own entry point with the modules every task try imports
# already imported. Its LocalExecutor forks a worker per slot, and each worker forks a process
# per task try, which then inherits them instead of importing them again: the scheduler's
# process group spent 4.2-5.3 CPU-seconds on a deferrable task's two tries, 2.1-2.2 with them
# (2026-11-29). Configuration, code and process tree are `airflow scheduler`'s. `-P`: the
# working directory is not on the path.
SCHEDULER = (
    "import sys\n"
    "import airflow.sdk.execution_time.task_runner\n"
    "import airflow.providers.cncf.kubernetes.hooks.kubernetes\n"
    "import airflow_t9k.operators.kinds, airflow_t9k.operators.ti, airflow_t9k.sensors.job\n"
    "from airflow.__main__ import main\n"
    "sys.argv[0] = 'airflow'\n"
    "sys.exit(main())\n"
)


def migrated_database(into: Path) -> None:
    """``into``, a SQLite database as `airflow db migrate` leaves it: migrated once for these
    versions of Airflow and its providers (a provider may bring tables) on this machine and
    copied, not once per Airflow home (3 CPU-seconds each)."""
    names = (d.metadata["Name"] or "" for d in importlib.metadata.distributions())
    versions = sorted(f"{n}=={importlib.metadata.version(n)}" for n in names if n.startswith("apache-airflow"))
    key = hashlib.sha256("\n".join(versions).encode()).hexdigest()[:12]
    template = Path(tempfile.gettempdir()) / f"airflow-t9k-migrated-{key}.db"
    with file_lock(template.with_suffix(".lock")):
        if not template.exists():
            home = Path(tempfile.mkdtemp(prefix="airflow-t9k-migrate-"))
            env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
            env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
                       AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db")  # fmt: skip
            out = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, check=False, timeout=300)
            assert out.returncode == 0, out.stdout + out.stderr
            os.replace(home / "airflow.db", template)  # whole, or not at all
            shutil.rmtree(home, ignore_errors=True)
    shutil.copyfile(template, into)


class _PortLost(Exception):
    """The api-server found its port taken (see ``AirflowStack.start``)."""


class AirflowStack:
    def __init__(self, home: Path, kubeconfig: Path, namespace: str, dags: Path = E2E_DAGS,
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        self.home = home
        self.port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        extra = {"kube_config_path": str(kubeconfig), "namespace": namespace}
        self.env.update(
            AIRFLOW_HOME=str(home),
            AIRFLOW__CORE__DAGS_FOLDER=str(dags),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
            AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            AIRFLOW__CORE__PARALLELISM="4",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{self.port}/execution/",
            AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(16),
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT="20",
            **NO_MIGRATION_CHECK,
            AIRFLOW_CONN_KUBERNETES_DEFAULT=json.dumps({"conn_type": "kubernetes", "extra": extra}),
            PYTHONPATH=str(ROOT),
        )
        self.env.update(env or {})
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.launched_at: dict[str, int] = {}  # each component's log size when it was last launched
        self.component_env: dict[str, dict[str, str]] = {}  # a component's own settings over the stack's

    def cli(self, *args: str) -> str:
        out = subprocess.run([AIRFLOW, *args], check=False, env=self.env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    def start(self, prepare: Callable[[], object] | None = None) -> None:
        """Every component started and healthy (``prepare``, if given, runs on the migrated
        database before any component starts). ``free_port`` only found the api-server's port
        free a moment before: another process's outgoing connection may take it meanwhile, and
        another stack's api-server may then answer there for its own healthy components. So
        the health counts only once this stack's api-server said it runs on its port; a stack
        whose api-server lost its port starts again on another (port allocation, not a retry)."""
        migrated_database(self.home / "airflow.db")
        if prepare is not None:
            prepare()
        for lost in range(3):
            self.launch("api-server")
            for name in COMPONENTS:
                self.launch(name)
            try:
                wait_until(self._up, timeout=120, interval=1, what="airflow components healthy")
                self._warm_execution_api()
                return
            except _PortLost:
                if lost == 2:
                    raise AssertionError(
                        f"the api-server lost its port three times:\n{self._written('api-server')[-3000:]}"
                    ) from None
                self.stop()
                self.port = free_port()
                self.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"http://127.0.0.1:{self.port}/execution/"

    def _warm_execution_api(self) -> None:
        """The execution API (Cadwyn) builds its versioned routers on its first request, on the
        api-server's event loop: 5 CPU-seconds in which nothing else is answered. A task whose
        supervisor calls then times out, retries, and fails before its operator runs (36 s on a
        loaded CI machine). So the stack is ready once that first request has answered."""
        url = f"http://127.0.0.1:{self.port}/execution/health"
        with urllib.request.urlopen(url, timeout=180) as r:
            assert r.status == 200, (url, r.status)

    def _written(self, name: str) -> str:
        """What the component's process wrote to its log since it was last launched."""
        return written_since(self.home / f"{name}.log", self.launched_at.get(name, 0))

    def _up(self) -> bool:
        written = self._written("api-server")
        if not re.search(rf"running on http://[^\s:]+:{self.port}\b", written, re.IGNORECASE):
            if self.procs["api-server"].poll() is not None and "address already in use" in written.lower():
                raise _PortLost
            return False
        return self.healthy()

    def launch(self, name: str, env: dict[str, str] | None = None) -> None:
        """Start one component (again), logging to ``<home>/<name>.log``. A second one of a kind
        is named ``<component>-<n>`` (``triggerer-2``). ``env``: this component's own settings
        over the stack's, kept for its later launches."""
        component = name if name in ("api-server", *COMPONENTS) else name.rsplit("-", 1)[0]
        args = ["api-server", "--port", str(self.port)] if component == "api-server" else [component]
        command = [sys.executable, "-P", "-c", SCHEDULER, *args] if component == "scheduler" else [AIRFLOW, *args]
        if env is not None:
            self.component_env[name] = env
        log_path = self.home / f"{name}.log"
        self.launched_at[name] = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:  # the child keeps its own descriptor
            self.procs[name] = subprocess.Popen(command, env={**self.env, **self.component_env.get(name, {})}, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def freeze(self, name: str) -> None:
        """SIGSTOP a component's whole process group: a host stalled, a VM paused, a long GC."""
        os.killpg(self.procs[name].pid, signal.SIGSTOP)

    def thaw(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGCONT)

    def kill(self, name: str) -> None:
        """SIGKILL a component and every process of its group, as when its node dies."""
        p = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)

    def terminate(self, name: str, grace: float = 30) -> None:
        """Stop a component as a restart or an upgrade does (SIGTERM to its group), SIGKILL
        after ``grace`` seconds."""
        p = self.procs[name]
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(grace)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            self.kill(name)

    def health(self) -> dict:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v2/monitor/health", timeout=2) as r:
                return json.loads(r.read())
        except OSError:
            return {}

    def healthy(self) -> bool:
        health = self.health()
        return all(health.get(c, {}).get("status") == "healthy" for c in ("scheduler", "triggerer", "dag_processor"))

    def stop(self) -> None:
        for p in self.procs.values():  # each component leads its own session: stop it and its workers
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)

    def trigger(self, dag_id: str, conf: dict | None = None) -> str:
        run_id = f"e2e-{uuid.uuid4().hex[:8]}"
        wait_until(lambda: self._dag_known(dag_id), timeout=60, interval=1, what=f"{dag_id} parsed")
        # Through the REST API: each `airflow dags` command costs seconds of imports.
        self._retry_locked(lambda: self.api("PATCH", f"dags/{dag_id}", {"is_paused": False}))
        # SQLite allows one writer: while the previous test's tasks still write, the API server
        # may answer 500 (database is locked, after its 5 s wait). Retry; a run that did get
        # created answers 409 the second time.
        for attempt in range(3):
            try:
                self.api(
                    "POST",
                    f"dags/{dag_id}/dagRuns",
                    {"dag_run_id": run_id, "logical_date": None, **({"conf": conf} if conf else {})},
                )
                break
            except urllib.error.HTTPError as exc:
                if exc.code == 409 and attempt:
                    break
                if exc.code != 500 or attempt == 2:
                    raise
                time.sleep(2)
        return run_id

    @staticmethod
    def _retry_locked(call: Any, attempts: int = 3) -> Any:
        """SQLite allows one writer: a write through the API server may answer 500 (database is
        locked) while the scheduler writes; try again, as for the run's creation below."""
        for attempt in range(attempts):
            try:
                return call()
            except urllib.error.HTTPError as exc:
                if exc.code != 500 or attempt == attempts - 1:
                    raise
                time.sleep(2)
        return None

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self._query("select state from dag_run where dag_id = ? and run_id = ?", dag_id, run_id)
        return rows[0][0] if rows else None

    def clear(self, dag_id: str, run_id: str, task_ids: list[str]) -> None:
        """Clear finished tasks through the REST API, as the UI's Clear button does, once their run
        has ended. Cleared in the second between the task's end and the run's, the task is set back
        while the run stays 'running' (Airflow re-queues finished runs only), and the scheduler may
        then end the run from the task states it read before the Clear (SQLite gives no snapshot to
        a read outside a write): the run ends 'success' with the task cleared and never scheduled
        again. Airflow's race, not ours; it made two tests flaky under CI's load."""
        wait_until(lambda: self.run_state(dag_id, run_id) in ("success", "failed"), timeout=60,
                   what=f"{dag_id} {run_id} ended before its Clear")  # fmt: skip
        body = {"dry_run": False, "dag_run_id": run_id, "task_ids": task_ids, "only_failed": False, "reset_dag_runs": True}
        self._retry_locked(lambda: self.api("POST", f"dags/{dag_id}/clearTaskInstances", body))

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        """A call to the REST API (every user is an admin here, no token needed)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/v2/{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def _dag_known(self, dag_id: str) -> bool:
        return bool(self._query("select 1 from dag where dag_id = ?", dag_id))

    def _query(self, sql: str, *args: object) -> list[tuple]:
        with sqlite3.connect(self.home / "airflow.db", timeout=10) as db:
            return db.execute(sql, args).fetchall()

    def ti(self, dag_id: str, run_id: str) -> tuple[str | None, int]:
        rows = self._query("select state, try_number from task_instance where dag_id = ? and run_id = ?", dag_id, run_id)
        return (rows[0][0], rows[0][1]) if rows else (None, 0)

    def tis(self, dag_id: str, run_id: str) -> dict[str, tuple[str | None, int, str | None]]:
        """Every task of a run: task id -> (state, try number, end date as stored, UTC)."""
        rows = self._query("select task_id, state, try_number, end_date from task_instance where dag_id = ? and run_id = ?",
                           dag_id, run_id)  # fmt: skip
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def states_until(self, dag_id: str, run_id: str, final: set[str], timeout: float = 120) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state, _ = self.ti(dag_id, run_id)
            if state and (not seen or seen[-1] != state):
                seen.append(state)
            if state in final:
                return seen
            time.sleep(0.25)
        raise AssertionError(f"{dag_id} {run_id} did not reach {final}; states seen: {seen}")

    def task_log(self, dag_id: str, run_id: str) -> str:
        files = (self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}").glob("task_id=*/attempt=*.log")
        return "".join(f.read_text(errors="replace") for f in files)

    def links(self, dag_id: str, run_id: str) -> dict[str, str]:
        body = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/job/links")
        return {name: href or "" for name, href in body["extra_links"].items()}

    def mark_failed(self, dag_id: str, run_id: str) -> None:
        self.api("PATCH", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/job", {"new_state": "failed"})


@contextlib.contextmanager
def airflow_on_cluster(cluster: Any, core: Any, home: Path, prefix: str, dags: Path = E2E_DAGS,
                       env: dict[str, str] | None = None) -> Iterator[tuple[AirflowStack, str]]:  # fmt: skip
    """A namespace of its own with the bundled controller watching it and a real Airflow using
    it; all three go at the end."""
    from tests.support.controller import ControllerProcess

    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_until(lambda: bool(core.list_namespaced_service_account(ns).items), what="default serviceaccount")
    controller = ControllerProcess(cluster.kubeconfig, ns, home).start()
    stack = AirflowStack(home, cluster.kubeconfig, ns, dags=dags, env=env)
    try:
        stack.start()
        yield stack, ns
    finally:
        stack.stop()
        controller.stop()
        core.delete_namespace(ns)
