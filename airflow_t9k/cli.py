"""The ``airflow-t9k`` console script.

Subcommands are added by the layers that own them; this module only dispatches, so that
``airflow-t9k controller`` never imports Airflow.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from airflow_t9k import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-t9k", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"airflow-t9k {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
