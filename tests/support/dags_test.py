"""`airflow dags test` for several DAGs in one process, one after the other.

    python -m tests.support.dags_test DAG_ID[=FILE] ...

Each is Airflow's own command, parsed by Airflow's CLI parser and run as `airflow dags test
DAG_ID [-f FILE]` runs it. What one process pays once instead of once per DAG: Airflow's
imports (about 3 CPU-seconds) and the in-process Execution API that `dags test` serves its
tasks from (its versioned FastAPI routers, about 3.6 CPU-seconds; Airflow caches it per
process). Each DAG's output lies between two marker lines (`MARK` below); the second says how
its command ended. Always exits 0: the caller reads each DAG's end from its output.
"""

from __future__ import annotations

import sys
import traceback

MARK = "=== t9k dags test"


def main(specs: list[str]) -> None:
    from airflow.cli.cli_parser import get_parser

    parser = get_parser()
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
