"""`airflow dags test` for several DAGs in one process, one after the other, or in forks of it.

    python -m tests.support.dags_test [--db SQLITE_FILE ...] DAG_ID[=FILE] ...

Each is Airflow's own command, parsed by Airflow's CLI parser and run as `airflow dags test
DAG_ID [-f FILE]` runs it. What one process pays once instead of once per DAG: Airflow's
imports (about 3 CPU-seconds) and the in-process Execution API that `dags test` serves its
tasks from (its versioned FastAPI routers, about 3.6 CPU-seconds; Airflow caches it per
process). Each DAG's output lies between two marker lines (`MARK` below); the second says how
its command ended. Always exits 0: the caller reads each DAG's end from its output.

With ``--db`` given N times, the process pays all that once, then forks N children that run
the DAGs at once, the DAGs dealt out in turn, each child on its own migrated SQLite database
(SQLite takes one writer at a time). A child writes to a file of its own; their outputs are
printed one after the other once all have ended, in the same form as without ``--db``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import traceback

MARK = "=== t9k dags test"


def run(parser, specs: list[str]) -> None:
    for spec in specs:
        dag_id, _, path = spec.partition("=")
        print(f"\n{MARK} {dag_id} begin ===", flush=True)
        ended = "ok"
        try:
            args = parser.parse_args(["dags", "test", dag_id, *(["-f", path] if path else [])])
            args.func(args)
        except SystemExit as exc:  # "DagRun failed", or a bad argument
            ended = f"exit {exc.code}"
        except Exception as exc:  # noqa: BLE001 - one DAG's error is its own; the next still runs
            traceback.print_exc()
            ended = f"error {type(exc).__name__}"
        sys.stderr.flush()
        print(f"\n{MARK} {dag_id} end: {ended} ===", flush=True)


def warm() -> None:
    """What every child would otherwise build for itself: the in-process Execution API's app
    (not its transport, which starts a thread: a fork copies no thread) with its versioned
    routers, and our operators."""
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    import airflow_t9k.operators  # noqa: F401

    app = in_process_api_server().app
    # Cadwyn builds the routers of every API version on the app's first request (5-6 of a
    # child's 8 CPU-seconds before its first DAG ran, by py-spy); it has no public call for it.
    if not getattr(app, "_cadwyn_initialized", True):
        app._cadwyn_initialize()


def forked(parser, shards: list[tuple[str, list[str]]]) -> None:
    """Each (database, specs) in a child of its own, at once; their outputs in order."""
    from airflow import settings

    # A thread running at the fork could hold a lock the child then waits on for ever.
    assert threading.active_count() == 1, f"threads before the fork: {threading.enumerate()}"
    outs, children = [], []
    for db, specs in shards:
        out = tempfile.NamedTemporaryFile(prefix="t9k-dags-test-", suffix=".out", delete=False)  # noqa: SIM115
        outs.append(out.name)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: its own output and database, then its DAGs
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(out.fileno(), 2)
                os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{db}"
                settings.configure_vars()
                settings.reconfigure_orm()
                run(parser, specs)
            except BaseException:  # noqa: BLE001 - whatever it is, the parent must learn of it
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
        out.close()
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    for name in outs:
        with open(name) as f:
            sys.stdout.write(f.read())
        os.unlink(name)
    sys.stdout.flush()


def main(argv: list[str]) -> None:
    dbs: list[str] = []
    while argv[:1] == ["--db"]:
        dbs.append(argv[1])
        argv = argv[2:]
    from airflow.cli.cli_parser import get_parser

    parser = get_parser()
    if not dbs:
        run(parser, argv)
        return
    warm()
    forked(parser, [(db, argv[i :: len(dbs)]) for i, db in enumerate(dbs)])


def split(output: str) -> dict[str, tuple[str, str]]:
    """Each DAG's output and how its command ended, from the output of ``main``."""
    found: dict[str, tuple[str, str]] = {}
    for part in output.split(f"\n{MARK} ")[1:]:
        head, _, body = part.partition(" ===\n")
        dag_id, _, word = head.partition(" ")
        if word == "begin":
            found[dag_id] = (body, "did not end")
        elif word.startswith("end: "):
            found[dag_id] = (found.get(dag_id, ("", ""))[0], word.removeprefix("end: "))
    return found


if __name__ == "__main__":
    main(sys.argv[1:])
