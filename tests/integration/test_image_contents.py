"""The images scripts/images/build.sh makes, read from their archives as built (issue 46): the
package's LICENSE and NOTICE in /usr/share/doc/airflow-t9k, Debian's copyright files kept, the
OCI labels in the configuration, the SBOM's packages, and Airflow's image installed within its
constraints. No cluster is used: `scripts/local-cluster.sh image build` builds each image once
(cached by content; .ci/run builds them before the tests) and the test reads the archive's layer.
Integration only because a build takes minutes (root and mmdebstrap)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import pytest

from scripts import sbom
from scripts.images import labels
from tests.support.chart import ROOT
from tests.support.deploy import script

DOC = "usr/share/doc/airflow-t9k"
CONSTRAINTS = ROOT / "scripts" / "images" / "airflow-constraints-3.3.2-py3.11.txt"


@dataclass
class Image:
    name: str
    archive: str
    contents: sbom.Contents
    doc: dict[str, Any]  # its SBOM


@functools.cache
def _image(name: str) -> Image:
    """Built once (a no-op when the archive of this content is there), read once for all the tests."""
    script("image", "build", name)
    archive = script("image", "tar", name)
    contents = sbom.read_image(archive, keep={f"{DOC}/LICENSE", f"{DOC}/NOTICE"})
    return Image(name, archive, contents, sbom.sbom(archive, contents=contents))


@pytest.fixture(scope="module", params=["controller", "airflow"])
def image(request: pytest.FixtureRequest) -> Image:
    return _image(request.param)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_image_carries_the_licence_notice_and_labels(image: Image) -> None:
    contents = image.contents
    for file in ("LICENSE", "NOTICE"):
        assert contents.files.get(f"{DOC}/{file}") == (ROOT / file).read_bytes(), f"{image.name}: /{DOC}/{file}"
    assert contents.config["config"]["Labels"] == labels.labels(image.name)
    # Debian's copyright files stay (the rest of /usr/share/doc does not): one for every package, some through
    # a doc directory linked to another package's (libgcc-s1 -> gcc-12-base).
    installed = [e["Package"] for e in sbom.dpkg_entries(contents.files[sbom.DPKG_STATUS].decode())]
    assert contents.copyright_of("base-files") == "/usr/share/doc/base-files/copyright"
    assert [p for p in installed if contents.copyright_of(p) is None] == []


def test_the_sbom_of_the_image_names_the_package_and_debian_s(image: Image) -> None:
    purls = [p["externalRefs"][0]["referenceLocator"] for p in image.doc["packages"][1:]]
    assert f"pkg:pypi/airflow-t9k@{labels.version()}" in purls
    assert any(p.startswith("pkg:deb/debian/python3@") for p in purls)
    assert any(p.startswith("pkg:deb/debian/base-files@") for p in purls)
    pypi = {p.split("/", 1)[1].split("@")[0] for p in purls if p.startswith("pkg:pypi/")}
    assert ("apache-airflow" in pypi) == (image.name == "airflow")
    assert ("kubernetes" in pypi) == (image.name == "airflow")  # left out of the controller's (controller.conf)


def test_airflow_s_image_keeps_to_its_constraints() -> None:
    doc = _image("airflow").doc
    pins = dict(line.split("==", 1) for line in CONSTRAINTS.read_text().splitlines() if "==" in line and not line.startswith("#"))
    installed = {_norm(p["name"]): p["versionInfo"] for p in doc["packages"][1:] if p["SPDXID"].startswith("SPDXRef-PyPI-")}
    assert installed["apache-airflow"] == "3.3.2"
    off = {n: (v, pins[n]) for n, v in installed.items() if n in pins and v != pins[n]}
    assert not off, f"installed vs constrained: {off}"
    assert set(installed) - {"airflow-t9k"} <= set(pins), "a distribution the constraints do not pin"
