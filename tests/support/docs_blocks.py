"""The shell blocks of the install documents, each with what the docs test does with it.

Every ```bash block of README.md and docs/install.md is preceded by a marker line:

    <!-- docs-test: run -->               tests/deploy/test_docs_commands.py runs it as written
    <!-- docs-test: skip: <reason> -->    it is not run, for the reason given

so a new block cannot be added without choosing (tests/unit/test_docs_blocks.py checks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (ROOT / "README.md", ROOT / "docs" / "install.md")
MARKER = re.compile(r"<!-- docs-test: (run|skip: (?P<reason>.*\S)) -->")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of the opening fence, 1-based
    section: str  # the nearest heading above it
    language: str
    text: str
    marker: str  # "run", "skip: <reason>", or "" when none precedes the fence

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line} ({self.section})"


def blocks(document: Path) -> list[Block]:
    lines = document.read_text().splitlines()
    found: list[Block] = []
    section, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        fence = FENCE.match(line)
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.fullmatch(previous.strip())
        found.append(Block(document, i + 1, section, fence.group(1), "\n".join(lines[i + 1 : end]) + "\n",
                           marker.group(1) if marker else ""))  # fmt: skip
        i = end + 1
    return found


def shell_blocks() -> list[Block]:
    return [b for d in DOCUMENTS for b in blocks(d) if b.language in ("bash", "sh", "shell", "console")]


def to_run(document: Path) -> list[Block]:
    return [b for b in blocks(document) if b.language == "bash" and b.marker == "run"]
