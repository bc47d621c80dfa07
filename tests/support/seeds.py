"""The YAML examples of the seed documents, applied verbatim by tests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"


def seed_yaml(prefix: str, index: int, fence: str = "yaml") -> dict[str, Any]:
    """The ``index``-th block fenced as ``fence`` in seed ``prefix`` (e.g. "001"; seed 002 fences YAML with "")."""
    path = next(SEEDS.glob(f"{prefix}_*.txt"))
    blocks = re.findall(rf"```{fence}\n(.*?)```", path.read_text(), re.S)
    return yaml.safe_load(blocks[index])
