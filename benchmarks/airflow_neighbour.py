"""A realistic neighbour on the benchmark's host (issue 49, item 4): a real Airflow, its api-server,
scheduler (LocalExecutor), dag-processor and triggerer on SQLite (tests/support/airflow.py, as the
end-to-end tests run it), holding N deferred tasks. Each is a deferrable ``T9kJobSensor`` waiting
in the triggerer for a GenericJob that nobody creates, in a namespace of its own: what a user's
Airflow carries while its training jobs run (the triggerer's watches, the scheduler's loop, the
dag-processor's parses), on the same two cores as the control plane and the controller under test.

Used by ``vs_kubeflow.py --neighbour N``; ``cpu_seconds()`` is the CPU its processes spent so far
(every process of the components' sessions, with the reaped children of each), for the report's
split of the host's CPU.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from _bench import CLK_TCK, ROOT, Cluster, wait_for

DAG_ID = "t9k_neighbour"
DAG = """
from airflow.sdk import DAG
from airflow_t9k.sensors.job import T9kJobSensor

with DAG({dag_id!r}, schedule=None, max_active_tasks={tasks}, catchup=False):
    T9kJobSensor.partial(task_id="wait", kind="GenericJob", namespace={namespace!r}, deferrable=True,
                         timeout=24 * 3600).expand(name=[f"absent-{{i}}" for i in range({tasks})])
"""


class Neighbour:
    def __init__(self, stack: object, tasks: int) -> None:
        self.stack, self.tasks = stack, tasks

    def sessions(self) -> set[int]:
        return {p.pid for p in self.stack.procs.values()}  # type: ignore[attr-defined]

    def cpu_seconds(self) -> float:
        """User and system CPU of every live process in the components' sessions, with what
        their reaped children spent (a task process that deferred and exited)."""
        sessions, total = self.sessions(), 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) in sessions:  # field 6 of stat(5), the session id
                total += sum(int(f) for f in fields[11:15]) / CLK_TCK  # utime stime cutime cstime
        return total

    def deferred(self) -> int:
        rows = self.stack._query(  # type: ignore[attr-defined]
            "select count(*) from task_instance where dag_id = ? and state = 'deferred'", DAG_ID
        )
        return int(rows[0][0])


@contextlib.contextmanager
def airflow_neighbour(cluster: Cluster, kubeconfig: Path, tasks: int, timeout: float = 900) -> Iterator[Neighbour]:
    """A real Airflow with ``tasks`` deferred sensors, up until the block ends."""
    import sys

    sys.path.insert(0, str(ROOT))
    from tests.support.airflow import AirflowStack

    namespace = f"neighbour-{uuid.uuid4().hex[:5]}"
    home = Path(tempfile.mkdtemp(prefix="t9k-neighbour-"))
    dags = home / "dags"
    dags.mkdir()
    (dags / f"{DAG_ID}.py").write_text(DAG.format(dag_id=DAG_ID, tasks=tasks, namespace=namespace))
    cluster.create_namespace(namespace)
    # As many task processes at once as a small deployment runs (the tests' stack runs 4); the
    # deferred ones hold no slot.
    stack = AirflowStack(home, kubeconfig, namespace, dags=dags, env={"AIRFLOW__CORE__PARALLELISM": "8"})
    try:
        stack.start()
        stack.trigger(DAG_ID)
        neighbour = Neighbour(stack, tasks)
        t0 = time.monotonic()
        wait_for(f"{tasks} neighbour tasks deferred", lambda: neighbour.deferred() >= tasks, timeout, 2)
        print(f"[neighbour] Airflow with {tasks} deferred sensors ready in {time.monotonic() - t0:.0f} s "
              f"(home {home})", flush=True)  # fmt: skip
        yield neighbour
    finally:
        stack.stop()
        cluster.delete_namespace(namespace, wait=False)
        shutil.rmtree(home, ignore_errors=True)
