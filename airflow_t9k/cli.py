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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    crds = sub.add_parser("crds", help="print the CustomResourceDefinitions of every job kind as YAML")
    crds.set_defaults(func=_crds)
    from airflow_t9k.controller.cli import add_controller_parser

    add_controller_parser(sub)
    return parser


def _crds(args: argparse.Namespace) -> int:
    import yaml

    from airflow_t9k.controller.crds import all_crds

    sys.stdout.write(yaml.safe_dump_all(all_crds(), sort_keys=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
