"""Every shell block of the install documents is either run by the docs test or says why not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.docs_blocks import DOCUMENTS, MARKER, blocks, shell_blocks, to_run


def test_every_shell_block_is_marked_run_or_skipped_with_a_reason() -> None:
    unmarked = [b.where for b in shell_blocks() if not b.marker]
    assert not unmarked, f"shell blocks without <!-- docs-test: run --> or <!-- docs-test: skip: why -->: {unmarked}"


def test_the_install_paths_are_run() -> None:
    """The platform team's install in both documents and the uninstall are among the blocks run."""
    sections = {(b.document.name, b.section) for d in DOCUMENTS for b in to_run(d)}
    assert ("README.md", "For the platform team: install it into a cluster") in sections
    assert {("install.md", "In a cluster"), ("install.md", "Uninstall")} <= sections


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<!-- docs-test: run -->\n```bash\nls\n```\n", ["run"]),
        ("<!-- docs-test: skip: runs forever -->\n\n```bash\nsleep inf\n```\n", ["skip: runs forever"]),
        ("<!-- docs-test: skip: -->\n```bash\nls\n```\n", [""]),  # a skip needs a reason
        ("Some text.\n```bash\nls\n```\n", [""]),
        ("<!-- docs-test: run -->\ntext between\n```bash\nls\n```\n", [""]),  # the marker must be just above
        ("```python\nx = 1\n```\n<!-- docs-test: run -->\n```bash\nls\n```\n", ["", "run"]),
    ],
)
def test_markers(tmp_path: Path, text: str, expected: list[str]) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# Title\n\n" + text)
    assert [b.marker for b in blocks(doc)] == expected


def test_a_block_knows_its_section_and_text(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# A\n\n## Install\n\n<!-- docs-test: run -->\n```bash\nhelm install x \\\n  --wait\n```\n")
    (block,) = blocks(doc)
    assert (block.section, block.line, block.text) == ("Install", 6, "helm install x \\\n  --wait\n")
    assert MARKER.fullmatch("<!-- docs-test: skip: because -->").group("reason") == "because"
