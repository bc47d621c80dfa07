#!/usr/bin/env python3
"""The requirements of a wheel (and of the extras named), less those excluded, one per line for pip.

    requirements.py WHEEL [--extras a,b] [--exclude NAME ...]

An image installs the wheel with --no-deps and then these: pip resolves their dependencies, and
what only an excluded requirement needs never comes along (scripts/images/build.sh, deploy/Containerfile).
"""

from __future__ import annotations

import argparse
import re
import zipfile
from email.parser import Parser


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(wheel: str, extras: set[str], excluded: set[str]) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(z.read(name).decode())
    out = []
    for req in meta.get_all("Requires-Dist") or []:
        spec, _, marker = req.partition(";")
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if extra and extra.group(1) not in extras:
            continue
        project = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if project is None or norm(project.group(1)) in {norm(e) for e in excluded}:
            continue
        marker = re.sub(r"\s*(and\s+)?extra\s*==\s*['\"][^'\"]+['\"]", "", marker).strip()
        out.append(spec.strip() + (f"; {marker}" if marker else ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel")
    ap.add_argument("--extras", default="")
    ap.add_argument("--exclude", nargs="*", default=[])
    args = ap.parse_args()
    for line in requirements(args.wheel, {e for e in args.extras.split(",") if e}, set(args.exclude)):
        print(line)


if __name__ == "__main__":
    main()
