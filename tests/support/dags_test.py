"""`airflow dags test` for several DAGs from one process: forks of it run them at once.

    python -m tests.support.dags_test PLAN.json

The plan is a list of shares, each run by a child of its own, at once with the others:
``{"db": SQLITE_FILE, "env": {NAME: VALUE}, "dags": [{"key": K, "id": DAG_ID, "file": FILE,
"conf": {...}}]}``; a share's DAGs run one after the other, on its own migrated database
(SQLite takes one writer at a time), with its environment (a connection to its own namespace,
say). Each is Airflow's own command, parsed by Airflow's CLI parser and run as `airflow dags
test DAG_ID [-f FILE] [--conf JSON]` runs it.

What the process pays once, before it forks, instead of once per child: Airflow's imports
(about 3 CPU-seconds) and the in-process Execution API that `dags test` serves its tasks from
(its versioned routers, which Cadwyn builds on the first request: 5-6 CPU-seconds). The
children write to files of their own; once all have ended their outputs are printed one after
the other, each DAG's between two marker lines (`MARK` below) named by its key, the second
saying how its command ended. Always exits 0: the caller reads each DAG's end from the output.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import traceback
from typing import Any

MARK = "=== t9k dags test"


def run(parser: argparse.ArgumentParser, dags: list[dict[str, Any]]) -> None:
    for dag in dags:
        key = dag.get("key") or dag["id"]
        print(f"\n{MARK} {key} begin ===", flush=True)
        ended = "ok"
        try:
            argv = ["dags", "test", dag["id"]]
            argv += ["-f", dag["file"]] if dag.get("file") else []
            argv += ["--conf", json.dumps(dag["conf"])] if dag.get("conf") else []
            args = parser.parse_args(argv)
            args.func(args)
        except SystemExit as exc:  # "DagRun failed", or a bad argument
            ended = f"exit {exc.code}"
        except Exception as exc:  # noqa: BLE001 - one DAG's error is its own; the next still runs
            traceback.print_exc()
            ended = f"error {type(exc).__name__}"
        sys.stderr.flush()
        print(f"\n{MARK} {key} end: {ended} ===", flush=True)


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


def forked(parser: argparse.ArgumentParser, shares: list[dict[str, Any]]) -> None:
    """Each share in a child of its own, at once; their outputs in order."""
    from airflow import settings

    # A thread running at the fork could hold a lock the child then waits on for ever.
    assert threading.active_count() == 1, f"threads before the fork: {threading.enumerate()}"
    outs, children = [], []
    for share in shares:
        out = tempfile.NamedTemporaryFile(prefix="t9k-dags-test-", suffix=".out", delete=False)  # noqa: SIM115
        outs.append(out.name)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: its own output, environment and database, then its DAGs
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(out.fileno(), 2)
                os.environ.update(share.get("env") or {})
                os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{share['db']}"
                settings.configure_vars()
                settings.reconfigure_orm()
                run(parser, share["dags"])
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
    with open(argv[0]) as f:
        shares = json.load(f)
    from airflow.cli.cli_parser import get_parser

    parser = get_parser()
    warm()
    forked(parser, shares)


def split(output: str) -> dict[str, tuple[str, str]]:
    """Each DAG's output and how its command ended, by key, from the output of ``main``."""
    found: dict[str, tuple[str, str]] = {}
    for part in output.split(f"\n{MARK} ")[1:]:
        head, _, body = part.partition(" ===\n")
        key, _, word = head.partition(" ")
        if word == "begin":
            found[key] = (body, "did not end")
        elif word.startswith("end: "):
            found[key] = (found.get(key, ("", ""))[0], word.removeprefix("end: "))
    return found


if __name__ == "__main__":
    main(sys.argv[1:])
