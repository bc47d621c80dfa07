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
    crds = sub.add_parser("crds", help="print the CustomResourceDefinitions of every job kind and of job templates as YAML")
    crds.set_defaults(func=_crds)
    check = sub.add_parser("check", help="say whether job manifests are whole and valid, and how to complete an excerpt")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(func=_check)
    doctor = sub.add_parser(
        "doctor",
        help="check what an Airflow connection's identity can do: the cluster, the CRDs, "
        "every right the tasks and the triggerer use (Airflow's Test button asks for /version only)",
    )
    doctor.add_argument("--conn-id", default="kubernetes_default", help="the Kubernetes connection (default kubernetes_default)")
    doctor.add_argument("--namespace", "-n", help="where jobs go (default: the connection's namespace, then default)")
    doctor.add_argument("--kind", action="append", dest="kinds", help="only these job kinds (default: all)")
    doctor.set_defaults(func=_doctor)
    from airflow_t9k.controller.cli import add_controller_parser

    add_controller_parser(sub)
    return parser


def _crds(args: argparse.Namespace) -> int:
    import yaml

    from airflow_t9k.controller.crds import all_crds, template_crds

    sys.stdout.write(yaml.safe_dump_all([*all_crds(), *template_crds()], sort_keys=False))
    return 0


def check_text(text: str) -> list[str]:
    """Why this manifest text cannot run, with the fix: an excerpt's gaps, else the controller's own refusal."""
    import yaml

    from airflow_t9k.api.excerpt import problems
    from airflow_t9k.kinds.base import InvalidSpec
    from airflow_t9k.kinds.registry import KINDS
    from airflow_t9k.kinds.templates import TEMPLATE_KINDS, TemplateError, apply_template, unresolved

    found = problems(text)
    if found:
        return found
    out = []
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    # Job templates in the same text are merged into the jobs naming them, as the controller would.
    given = {(d["kind"], d["metadata"]["name"]): d for d in docs if d.get("kind") in TEMPLATE_KINDS}
    for doc in docs:
        if doc.get("kind") in TEMPLATE_KINDS:
            continue
        kind = KINDS.get(str(doc.get("kind")))
        if kind is None:
            out.append(f"kind {doc.get('kind')!r} is not one of {', '.join(sorted([*KINDS, *TEMPLATE_KINDS]))}")
            continue
        job = {**doc, "metadata": {"namespace": "default", "uid": "check", **doc["metadata"]}}
        try:
            if unresolved(job):
                ref = (job["spec"]["templateRef"].get("kind") or TEMPLATE_KINDS[0], job["spec"]["templateRef"].get("name"))
                if ref not in given:
                    continue  # checked when the controller merges the template in (docs/templates.md)
                job = apply_template(job, given[ref])
            kind.validate(job)
        except (InvalidSpec, TemplateError) as exc:
            out.append(f"{doc['kind']} {doc['metadata']['name']}: {exc}")
    return out


def _check(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            found = check_text(f.read())
        bad += bool(found)
        print(f"{path}: " + ("ok" if not found else "; ".join(found)))
    return 1 if bad else 0


def _doctor(args: argparse.Namespace) -> int:
    from airflow_t9k.hooks.doctor import report, run  # Airflow's: only here
    from airflow_t9k.hooks.t9k import T9kHook

    hook = T9kHook(kubernetes_conn_id=args.conn_id)
    namespace = args.namespace or hook.get_namespace() or "default"
    checks = run(hook, namespace, args.kinds)
    print(report(checks))
    return 0 if all(c.ok for c in checks) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
