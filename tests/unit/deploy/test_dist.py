"""What a release carries (issue 46; docs/development.md, "Releases"): the licence and notice in the
sdist, the wheel and the chart's archive; the images' OCI archives and labels; the SBOM read from an
image archive; the Containerfile's labels and ignore file. The images themselves are read in
tests/integration/test_image_contents.py (building one takes minutes)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest

from scripts import sbom
from scripts.images import archive, labels
from tests.support.chart import CHART, ROOT, helm

VERSION = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE).group(1)  # type: ignore[union-attr]
LICENCE_FILES = ("LICENSE", "NOTICE")


def test_the_licence_is_apache_2_and_the_notice_names_the_project() -> None:
    text = (ROOT / "LICENSE").read_text()
    # The text as the ASF publishes it (www.apache.org/licenses/LICENSE-2.0.txt), byte for byte.
    assert hashlib.sha256(text.encode()).hexdigest() == "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
    notice = (ROOT / "NOTICE").read_text()
    assert notice.startswith("airflow-t9k\nCopyright 2026 The airflow-t9k Authors\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist and the wheel built from the sdist, as `make dist` and pip build them (python -m
    build), from a copy of what the sdist is made of (setuptools writes *.egg-info into its source)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", *LICENCE_FILES):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "airflow_t9k", src / "airflow_t9k", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "build", "--outdir", str(out), str(src)]
    if _setuptools_has_pep639():  # else build installs pyproject.toml's setuptools into an environment of its own
        cmd.append("--no-isolation")
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out / f"airflow_t9k-{VERSION}.tar.gz", out / f"airflow_t9k-{VERSION}-py3-none-any.whl"


def _setuptools_has_pep639() -> bool:
    if importlib.util.find_spec("setuptools") is None:
        return False
    from importlib.metadata import version

    return int(version("setuptools").split(".")[0]) >= 77


def _metadata(text: str) -> Any:
    return Parser().parsestr(text, headersonly=True)


def _check_metadata(meta: Any) -> None:
    assert meta["License-Expression"] == "Apache-2.0"
    assert sorted(meta.get_all("License-File")) == ["LICENSE", "NOTICE"]
    classifiers = meta.get_all("Classifier")
    assert "Framework :: Apache Airflow :: Provider" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the expression alone
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert set(urls) == {"Homepage", "Documentation", "Source", "Issues", "Changelog"}
    assert all(u.startswith("https://github.com/airflow-t9k/airflow-t9k") for u in urls.values())


def test_the_sdist_carries_the_licence_and_notice(built: tuple[Path, Path]) -> None:
    sdist, _ = built
    top = f"airflow_t9k-{VERSION}"
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
        for name in LICENCE_FILES:
            assert f"{top}/{name}" in names
            assert tar.extractfile(f"{top}/{name}").read() == (ROOT / name).read_bytes()  # type: ignore[union-attr]
        _check_metadata(_metadata(tar.extractfile(f"{top}/PKG-INFO").read().decode()))  # type: ignore[union-attr]
    assert f"{top}/airflow_t9k/ui/static/jobs.js" in names  # the package data too, or pip's wheel from it lacks the UI
    assert not [n for n in names if "/tests/" in n or "__pycache__" in n]


def test_the_wheel_carries_the_licence_and_notice(built: tuple[Path, Path]) -> None:
    _, wheel = built
    info = f"airflow_t9k-{VERSION}.dist-info"
    with zipfile.ZipFile(wheel) as z:
        for name in LICENCE_FILES:
            assert z.read(f"{info}/licenses/{name}") == (ROOT / name).read_bytes()
        _check_metadata(_metadata(z.read(f"{info}/METADATA").decode()))
        assert "airflow_t9k/py.typed" in z.namelist()


def test_the_chart_carries_copies_of_the_licence_and_notice() -> None:
    # One source of truth: scripts/gen_chart.py copies them (and --check fails on a stale copy).
    for name in LICENCE_FILES:
        assert (CHART / name).read_bytes() == (ROOT / name).read_bytes(), f"run scripts/gen_chart.py: chart's {name} is stale"


def test_the_packaged_chart_holds_the_licence_and_the_release_version(tmp_path: Path) -> None:
    version = "9.8.7-rc.1"  # not the chart's own: `make dist` sets both at package time
    subprocess.run([helm(), "package", str(CHART), "--version", version, "--app-version", version, "--destination",
                    str(tmp_path)], check=True, capture_output=True)  # fmt: skip
    with tarfile.open(tmp_path / f"airflow-t9k-{version}.tgz") as tar:
        names = set(tar.getnames())
        assert {"airflow-t9k/LICENSE", "airflow-t9k/NOTICE"} <= names
        assert tar.extractfile("airflow-t9k/LICENSE").read() == (ROOT / "LICENSE").read_bytes()  # type: ignore[union-attr]
        chart = tar.extractfile("airflow-t9k/Chart.yaml").read().decode()  # type: ignore[union-attr]
    assert f"version: {version}" in chart
    assert re.search(rf"^appVersion: \"?{re.escape(version)}\"?$", chart, re.MULTILINE), chart


# -- images: the archive's layout, the labels, the SBOM (on a small root filesystem made here) --


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


STATUS = b"""Package: base-files
Status: install ok installed
Architecture: amd64
Version: 12.4+deb12u5
Description: Debian base system miscellaneous files
 a continuation line: Version: 0

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2024a-0+deb12u1

Package: libgcc-s1
Status: install ok installed
Architecture: amd64
Version: 12.2.0-14
"""
SITE = "usr/local/lib/python3.11/dist-packages"


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    """A root filesystem like mmdebstrap's (./-prefixed names): a dpkg status, two distributions,
    a copyright file, the package's licence."""
    path = tmp_path / "rootfs.tar"
    with tarfile.open(path, "w") as tar:
        _add(tar, "./var/lib/dpkg/status", STATUS)
        _add(tar, "./etc/os-release", b'ID=debian\nVERSION_ID="12"\n')
        _add(tar, "./usr/share/doc/base-files/copyright", b"Format: ...")
        link = tarfile.TarInfo("./usr/share/doc/libgcc-s1")  # Debian links some packages' doc directory to another's
        link.type, link.linkname = tarfile.SYMTYPE, "base-files"
        tar.addfile(link)
        metadata = {
            f"airflow_t9k-{VERSION}": f"Name: airflow-t9k\nVersion: {VERSION}\nLicense-Expression: Apache-2.0\n\nbody",
            "six-1.17.0": "Name: six\nVersion: 1.17.0\nLicense: MIT\nClassifier: License :: OSI Approved :: MIT License\n",
            "odd-2.0": "Name: Odd_Name\nVersion: 2.0+local\nLicense: BSD\nClassifier: License :: OSI Approved :: BSD License\n",
        }
        for dist, text in metadata.items():
            _add(tar, f"./{SITE}/{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\n{text}".encode())
        _add(tar, "./usr/share/doc/airflow-t9k/LICENSE", (ROOT / "LICENSE").read_bytes())
    return path


def _archive(rootfs: Path, out: Path, *extra: str) -> Path:
    refs = ["ghcr.io/airflow-t9k/airflow-t9k/controller:" + VERSION, "localhost:5000/x/controller"]
    label_args = [a for k, v in labels.labels("controller", "abc123").items() for a in ("--label", f"{k}={v}")]
    archive.main([str(rootfs), *refs, "--out", str(out), "--entrypoint", '["airflow-t9k"]', "--user", "65532:65532",
                  *label_args, *extra])  # fmt: skip
    return out


def _blob(tar: tarfile.TarFile, digest: str) -> bytes:
    data = tar.extractfile("blobs/" + digest.replace(":", "/")).read()  # type: ignore[union-attr]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest  # content-addressed, as a registry checks
    return data


def test_an_oci_archive_is_an_image_layout_a_registry_takes(rootfs: Path, tmp_path: Path) -> None:
    out = _archive(rootfs, tmp_path / "image.oci.tar", "--oci")
    with tarfile.open(out) as tar:
        assert json.loads(tar.extractfile("oci-layout").read()) == {"imageLayoutVersion": "1.0.0"}  # type: ignore[union-attr]
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        refs = [(m["annotations"]["org.opencontainers.image.ref.name"], m["annotations"]["io.containerd.image.name"])
                for m in index["manifests"]]  # fmt: skip
        assert refs == [(VERSION, f"ghcr.io/airflow-t9k/airflow-t9k/controller:{VERSION}"),
                        ("latest", "localhost:5000/x/controller")]  # fmt: skip
        assert len({m["digest"] for m in index["manifests"]}) == 1
        manifest = json.loads(_blob(tar, index["manifests"][0]["digest"]))
        assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        config = json.loads(_blob(tar, manifest["config"]["digest"]))
        (layer,) = manifest["layers"]
        assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
        unzipped = gzip.decompress(_blob(tar, layer["digest"]))
    # The config's diff_id is the uncompressed layer's, which is the root filesystem as built.
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(unzipped).hexdigest()]
    assert unzipped == rootfs.read_bytes()
    assert config["config"]["Labels"] == labels.labels("controller", "abc123") == manifest["annotations"]
    assert config["config"]["User"] == "65532:65532"
    # Built twice, the same bytes (gzip without a name or time): a rebuild pushes nothing new.
    again = _archive(rootfs, tmp_path / "again.oci.tar", "--oci")
    assert again.read_bytes() == out.read_bytes()


def test_the_labels_name_source_licence_and_the_package_version() -> None:
    got = labels.labels("airflow")
    assert got["org.opencontainers.image.version"] == VERSION
    assert got["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert got["org.opencontainers.image.source"] == "https://github.com/airflow-t9k/airflow-t9k"
    assert "3.3.2" in got["org.opencontainers.image.description"]
    assert labels.labels("postgres")["org.opencontainers.image.licenses"] == "PostgreSQL"


@pytest.mark.parametrize("oci", [True, False], ids=["oci", "docker-archive"])
def test_the_sbom_lists_the_image_s_python_and_debian_packages(rootfs: Path, tmp_path: Path, oci: bool) -> None:
    out = _archive(rootfs, tmp_path / "image.tar", *(["--oci"] if oci else []))
    doc = sbom.sbom(str(out), created=0)
    assert doc["spdxVersion"] == "SPDX-2.3"
    assert doc["dataLicense"] == "CC0-1.0"
    assert doc["creationInfo"]["created"] == "1970-01-01T00:00:00Z"
    image, *packages = doc["packages"]
    assert (image["name"], image["versionInfo"], image["licenseDeclared"]) == ("airflow-t9k-controller", VERSION, "Apache-2.0")
    by_purl = {p["externalRefs"][0]["referenceLocator"]: p for p in packages}
    assert set(by_purl) == {
        f"pkg:pypi/airflow-t9k@{VERSION}",
        "pkg:pypi/six@1.17.0",
        "pkg:pypi/odd-name@2.0%2Blocal",
        "pkg:deb/debian/base-files@12.4%2Bdeb12u5?arch=amd64&distro=debian-12",
        "pkg:deb/debian/tzdata@2024a-0%2Bdeb12u1?arch=all&distro=debian-12",  # the removed one is not there
        "pkg:deb/debian/libgcc-s1@12.2.0-14?arch=amd64&distro=debian-12",
    }
    assert by_purl[f"pkg:pypi/airflow-t9k@{VERSION}"]["licenseDeclared"] == "Apache-2.0"
    assert by_purl["pkg:pypi/six@1.17.0"]["licenseDeclared"] == "MIT"
    odd = by_purl["pkg:pypi/odd-name@2.0%2Blocal"]  # "BSD License" names no one licence: said, not guessed
    assert odd["licenseDeclared"] == "NOASSERTION"
    assert "BSD" in odd["licenseComments"]
    base = by_purl["pkg:deb/debian/base-files@12.4%2Bdeb12u5?arch=amd64&distro=debian-12"]
    assert base["licenseComments"].endswith("/usr/share/doc/base-files/copyright")
    assert "licenseComments" not in by_purl["pkg:deb/debian/tzdata@2024a-0%2Bdeb12u1?arch=all&distro=debian-12"]
    linked = by_purl["pkg:deb/debian/libgcc-s1@12.2.0-14?arch=amd64&distro=debian-12"]
    assert linked["licenseComments"].endswith("/usr/share/doc/base-files/copyright")
    ids = [p["SPDXID"] for p in doc["packages"]]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"SPDXRef-[A-Za-z0-9.-]+", i) for i in ids)
    contained = {r["relatedSpdxElement"] for r in doc["relationships"] if r["relationshipType"] == "CONTAINS"}
    assert contained == set(ids[1:])
    kept = sbom.read_image(str(out), keep={"usr/share/doc/airflow-t9k/LICENSE"})
    assert kept.files["usr/share/doc/airflow-t9k/LICENSE"] == (ROOT / "LICENSE").read_bytes()


# -- deploy/Containerfile: its labels are build.sh's; its ignore file leaves out what no image needs --

CONTAINERFILE = ROOT / "deploy" / "Containerfile"


def test_the_containerfile_labels_are_the_built_image_s() -> None:
    text = CONTAINERFILE.read_text()
    final = text.rsplit("\nFROM ", 1)[1]  # the image's own stage, not the wheels' builder
    args = dict(re.findall(r"^ARG (\w+)=(.*)$", final, re.MULTILINE))
    got = {k: v.replace("${VERSION}", args["VERSION"]) for k, v in re.findall(r'^LABEL (\S+)="(.*)"$', final, re.MULTILINE)}
    assert got == labels.labels("controller")
    assert "COPY LICENSE NOTICE /usr/share/doc/airflow-t9k/" in final


def _ignored(patterns: list[str], path: str) -> bool:
    """Whether Docker's rules leave ``path`` out: a pattern matches the path or one of its parent
    directories; ``**`` spans directories; a later ``!pattern`` takes a match back."""

    def match(pattern: str, p: str) -> bool:
        regex = (
            re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        )
        return re.fullmatch(regex, p) is not None

    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    out = False
    for raw in patterns:
        negated = raw.startswith("!")
        pattern = raw.lstrip("!").strip("/")
        if any(match(pattern, p) for p in prefixes):
            out = not negated
    return out


def test_the_ignore_file_keeps_what_the_containerfile_copies_and_nothing_of_the_workspace() -> None:
    text = (ROOT / ".dockerignore").read_text()
    assert (ROOT / ".containerignore").read_text() == text, ".containerignore is .dockerignore's copy (Podman, Buildah)"
    patterns = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    sources = []
    for line in re.findall(r"^COPY (?!--from)(.*)$", CONTAINERFILE.read_text(), re.MULTILINE):
        sources += line.split()[:-1]
    assert {"pyproject.toml", "LICENSE", "airflow_t9k"} <= set(sources)
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not _ignored(patterns, src), f"{src} is COPY'd but .dockerignore leaves it out"
    assert not _ignored(patterns, "airflow_t9k/controller/runner.py")
    assert not _ignored(patterns, "airflow_t9k/ui/static/jobs.js")
    for left_out in (".venv/bin/python", ".git/HEAD", ".local-cluster/kubeconfig", "dist/x.whl", "build/lib",
                     "airflow_t9k.egg-info/PKG-INFO", "airflow_t9k/__pycache__/cli.cpython-311.pyc",
                     "airflow_t9k/k8s/__pycache__/x.pyc", "ui/node_modules/esbuild", "tests/conftest.py",
                     "benchmarks/ceiling.py", ".venv-airflow-next/bin/python"):  # fmt: skip
        assert _ignored(patterns, left_out), left_out
