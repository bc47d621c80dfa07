"""The example manifests in examples/manifests/: what users `kubectl apply -f` and the tests load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from airflow_t9k.api.resources import resource_for
from airflow_t9k.kinds.registry import KINDS
from tests.builders import run

MANIFESTS = Path(__file__).resolve().parents[2] / "examples" / "manifests"
FILES = sorted(MANIFESTS.glob("*.yaml"))
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def test_the_manifests_the_tests_load_are_there():
    names = {p.stem for p in FILES}
    assert {"genericjob-example", "genericjob-tf-config", "colossalaijob-example", "ascendjob-pytorch"} <= names
    assert not list(MANIFESTS.glob("*.yml")), "use the .yaml suffix so the glob above sees every manifest"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_manifest_parses_and_names_a_known_kind(path):
    docs = _docs(path)
    assert len(docs) == 1, "one job per file"
    job = docs[0]
    kind = job.get("kind")
    assert kind in KINDS, f"{path.name}: kind {kind!r} is not one of {sorted(KINDS)}"
    assert job["apiVersion"] == resource_for(kind).api_version
    assert path.name.startswith(kind.lower() + "-"), "files are named <kind>-*.yaml"
    assert DNS_LABEL.match(job["metadata"]["name"])
    assert "namespace" not in job["metadata"], "applied to the namespace the user chooses"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_manifest_is_a_valid_spec_that_the_controller_starts(path):
    job = _docs(path)[0]
    job["metadata"].setdefault("uid", "uid-1")
    job["metadata"].setdefault("namespace", "ns")
    KINDS[job["kind"]].validate(job)
    first = run(job)
    assert first.status.get("phase") != "Failed", first.status
    assert first.creates(), "the first reconcile creates the job's children"


def test_names_are_unique_so_the_whole_directory_applies():
    keys = [(d["kind"], d["metadata"]["name"]) for p in FILES for d in _docs(p)]
    assert len(keys) == len(set(keys))


def test_nothing_in_the_repository_reads_the_specification_folder_beside_it():
    # A user's clone has no ../shared: code, scripts and tests must not reach for it.
    root = MANIFESTS.parents[1]
    needles = ('/ "shared"', "/ 'shared'", "../shared", "/work/shared", "shared/seeds", "shared/reference")
    files = [p for d in ("airflow_t9k", "tests", "scripts", "dags_examples", "benchmarks", "tools", ".ci")
             for p in (root / d).rglob("*") if p.is_file() and p.suffix in (".py", ".sh", ".yaml", "")]  # fmt: skip
    files += [root / "Makefile", root / "pyproject.toml"]
    offenders = [
        str(p.relative_to(root))
        for p in files
        if p != Path(__file__) and any(n in p.read_text(errors="replace") for n in needles)
    ]
    assert offenders == []
