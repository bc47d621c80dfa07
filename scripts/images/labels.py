#!/usr/bin/env python3
"""The OCI labels of an image (org.opencontainers.image.*), one KEY=VALUE a line.

    labels.py NAME [--revision SHA]

scripts/images/build.sh writes them into the configuration of every image it builds; deploy/Containerfile
repeats the controller's (tests/unit/deploy/test_dist.py keeps the two equal). A recipe
(scripts/images/NAME.conf) names its description and, when not this project's, its licences:

    IMAGE_DESCRIPTION="..."
    IMAGE_LICENSES="PostgreSQL"
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCE = "https://github.com/airflow-t9k/airflow-t9k"
LICENSES = "Apache-2.0"  # pyproject.toml's licence expression


def version() -> str:
    # A regex, not tomllib: build.sh runs the host's python3, which may be older than 3.11.
    found = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit("no version in pyproject.toml")
    return found.group(1)


def recipe_value(name: str, key: str) -> str | None:
    text = (HERE / f"{name}.conf").read_text()
    found = re.search(rf"""^{key}=(["'])(.*?)\1\s*(#.*)?$""", text, re.MULTILINE)
    return found.group(2) if found else None


def labels(name: str, revision: str | None = None) -> dict[str, str]:
    out = {
        "org.opencontainers.image.title": f"airflow-t9k-{name}",
        "org.opencontainers.image.description": recipe_value(name, "IMAGE_DESCRIPTION") or f"airflow-t9k's {name} image",
        "org.opencontainers.image.source": SOURCE,
        "org.opencontainers.image.licenses": recipe_value(name, "IMAGE_LICENSES") or LICENSES,
        "org.opencontainers.image.version": version(),
    }
    if revision:
        out["org.opencontainers.image.revision"] = revision
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--revision")
    args = ap.parse_args(argv)
    for key, value in labels(args.name, args.revision).items():
        print(f"{key}={value}")


if __name__ == "__main__":
    main()
