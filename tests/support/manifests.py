"""The example manifests the project ships in examples/manifests/, loaded fresh for each use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "examples" / "manifests"


def manifest(name: str) -> dict[str, Any]:
    """examples/manifests/<name>.yaml as a new dict (tests may change it freely)."""
    return yaml.safe_load((MANIFESTS / f"{name}.yaml").read_text())
