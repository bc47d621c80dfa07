"""The UI's built JavaScript: committed, matching its source, and shipped in the wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BUNDLES = ("jobs.js", "task.js")


def test_the_committed_bundles_are_what_the_source_builds():
    out = subprocess.run(
        [str(ROOT / "scripts" / "build-ui.sh"), "--check"], check=False, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_each_bundle_registers_its_component_under_the_react_app_name():
    from airflow_t9k.ui.plugin import NAV, TAB

    for app in (NAV, TAB):
        text = (ROOT / "airflow_t9k" / app["bundle_url"].replace("t9k/static", "ui/static")).read_text()
        assert f'globalThis["{app["name"]}"]' in text, app["name"]  # how the Airflow UI finds it
        # React and Chakra are the host's (a second React breaks hooks): read from globals, not bundled.
        assert "globalThis.React;" in text
        assert "globalThis.ChakraUI;" in text
        assert "__CLIENT_INTERNALS" not in text
        assert len(text) < 60_000


def test_the_wheel_ships_the_bundles(tmp_path):
    # Built from a copy of the tracked files: an in-tree build would leave build/ behind, and
    # stale files there could reach later wheels.
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(src)],
                         check=False, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    wheel = next(tmp_path.glob("airflow_t9k-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for bundle in BUNDLES:
        assert f"airflow_t9k/ui/static/{bundle}" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "airflow_t9k.ui.plugin:T9kUiPlugin" in zipfile.ZipFile(wheel).read(entry).decode()
