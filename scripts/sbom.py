#!/usr/bin/env python3
"""An SPDX 2.3 SBOM (JSON) of an image archive: the Python distributions installed in it (their
.dist-info) and the Debian packages its dpkg status lists, read from the archive's layers alone.

    sbom.py IMAGE.tar [--out FILE.spdx.json]

The archive is either layout scripts/images/archive.py writes (docker-archive or OCI image layout),
as `make dist` and scripts/local-cluster.sh build them; nothing is run and nothing is fetched.
A Python package's licence is its License-Expression (PEP 639), else the one licence its
classifiers name, else NOASSERTION with what its metadata says in a comment; a Debian package's is
NOASSERTION with a pointer to its copyright file in the image (Debian's names are not SPDX's).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import tarfile
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from email.parser import Parser
from typing import IO, Any
from urllib.parse import quote

SOURCE = "https://github.com/airflow-t9k/airflow-t9k"
DIST_INFO = re.compile(r"^usr/(?:local/)?lib/python3[^/]*/(?:dist|site)-packages/[^/]+\.dist-info/METADATA$")
DPKG_STATUS = "var/lib/dpkg/status"
OS_RELEASE = ("etc/os-release", "usr/lib/os-release")
COPYRIGHT = re.compile(r"^usr/share/doc/([^/]+)/copyright$")
DOC_DIR = re.compile(r"^usr/share/doc/([^/]+)$")
# The trove classifiers that name one licence without doubt (a "BSD License" does not say which).
CLASSIFIERS = {
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: MIT License": "MIT",
    "License :: OSI Approved :: MIT No Attribution License (MIT-0)": "MIT-0",
    "License :: OSI Approved :: ISC License (ISCL)": "ISC",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "License :: OSI Approved :: The Unlicense (Unlicense)": "Unlicense",
    "License :: OSI Approved :: zlib/libpng License": "Zlib",
}

Obj = dict[str, Any]


@dataclass
class Contents:
    """What the SBOM reads from an image: its configuration and the few files that list packages."""

    config: Obj
    manifest_digest: str | None  # an OCI archive's, as a registry will name the image
    files: dict[str, bytes] = field(default_factory=dict)
    copyrights: set[str] = field(default_factory=set)
    doc_links: dict[str, str] = field(default_factory=dict)  # a package's doc directory linked to another's

    def copyright_of(self, package: str) -> str | None:
        """The path of a Debian package's copyright file in the image, if there is one."""
        for name in (package, self.doc_links.get(package)):
            if name and f"usr/share/doc/{name}/copyright" in self.copyrights:
                return f"/usr/share/doc/{name}/copyright"
        return None


def _member(archive: tarfile.TarFile, name: str) -> IO[bytes]:
    f = archive.extractfile(name)
    if f is None:
        raise SystemExit(f"{archive.name}: {name} is not a file")
    return f


def _json(archive: tarfile.TarFile, name: str) -> Obj:
    return json.loads(_member(archive, name).read())


def _blob(digest: str) -> str:
    return "blobs/" + digest.replace(":", "/", 1)


def read_image(path: str, keep: Collection[str] = ()) -> Contents:
    """The image's configuration and the files that list its packages, and those named in ``keep``
    (paths without the leading slash), from its layers in order."""
    with tarfile.open(path) as archive:
        names = set(archive.getnames())
        if "index.json" in names:  # OCI image layout: index -> manifest -> config and layers
            (entry, *_) = _json(archive, "index.json")["manifests"]
            manifest = _json(archive, _blob(entry["digest"]))
            contents = Contents(_json(archive, _blob(manifest["config"]["digest"])), entry["digest"])
            layers = [(_blob(layer["digest"]), layer["mediaType"].endswith("gzip")) for layer in manifest["layers"]]
        else:  # docker-archive: manifest.json names the config and the layers
            (entry, *_) = _json(archive, "manifest.json")
            contents = Contents(_json(archive, entry["Config"]), None)
            layers = [(name, False) for name in entry["Layers"]]
        for name, zipped in layers:  # in order: a later layer's file (or whiteout) wins
            raw = _member(archive, name)
            _scan(gzip.GzipFile(fileobj=raw) if zipped else raw, contents, set(keep))
    return contents


def _scan(layer: IO[bytes], contents: Contents, keep: set[str]) -> None:
    with tarfile.open(fileobj=layer, mode="r|") as tar:
        for info in tar:
            path = os.path.normpath(info.name).lstrip("/")
            base = os.path.basename(path)
            if base.startswith(".wh."):  # a whiteout: the file below it is gone
                gone = os.path.join(os.path.dirname(path), base[4:])
                contents.files.pop(gone, None)
                contents.copyrights.discard(gone)
                continue
            if COPYRIGHT.match(path):
                contents.copyrights.add(path)
            elif info.issym() and (doc := DOC_DIR.match(path)) and "/" not in info.linkname.strip("/"):
                contents.doc_links[doc.group(1)] = info.linkname.strip("/")  # libgcc-s1 -> gcc-12-base
            if info.isfile() and (path == DPKG_STATUS or path in OS_RELEASE or path in keep or DIST_INFO.match(path)):
                f = tar.extractfile(info)
                if f is not None:
                    contents.files[path] = f.read()


def _spdx_id(*parts: str) -> str:
    return "SPDXRef-" + re.sub(r"[^A-Za-z0-9.-]", "-", "-".join(parts))


def _package(spdx_id: str, name: str, version: str, purl: str, licence: str, comment: str | None) -> Obj:
    pkg: Obj = {
        "SPDXID": spdx_id,
        "name": name,
        "versionInfo": version,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": licence,
        "copyrightText": "NOASSERTION",
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": purl}],
    }
    if comment:
        pkg["licenseComments"] = comment
    return pkg


def python_licence(meta: Any) -> tuple[str, str | None]:
    """(SPDX expression or NOASSERTION, a comment with what the metadata says otherwise)."""
    if meta.get("License-Expression"):
        return meta["License-Expression"].strip(), None
    classifiers = [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    named = {CLASSIFIERS[c] for c in classifiers if c in CLASSIFIERS}
    if len(named) == 1 and len(classifiers) == 1:
        return named.pop(), None
    said = [c.rsplit(" :: ", 1)[-1] for c in classifiers]
    text = (meta.get("License") or "").strip().splitlines()
    if text and len(text[0]) <= 100:
        said.insert(0, text[0])
    return "NOASSERTION", ("The package's metadata says: " + "; ".join(said)) if said else None


def python_packages(contents: Contents) -> list[Obj]:
    out = []
    for path in sorted(p for p in contents.files if DIST_INFO.match(p)):
        meta = Parser().parsestr(contents.files[path].decode("utf-8", "replace"), headersonly=True)
        name, version = meta["Name"], meta["Version"]
        norm = re.sub(r"[-_.]+", "-", name).lower()
        licence, comment = python_licence(meta)
        out.append(_package(_spdx_id("PyPI", norm, version), name, version, f"pkg:pypi/{norm}@{quote(version, safe='')}",
                            licence, comment))  # fmt: skip
    return out


def _os_release(contents: Contents) -> dict[str, str]:
    for path in OS_RELEASE:
        if path in contents.files:
            pairs = (line.split("=", 1) for line in contents.files[path].decode().splitlines() if "=" in line)
            return {k: v.strip('"') for k, v in pairs}
    return {}


def dpkg_entries(status: str) -> list[dict[str, str]]:
    """The installed packages of a dpkg status file (continuation lines dropped: no field read here has them)."""
    out = []
    for stanza in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            out.append(fields)
    return out


def debian_packages(contents: Contents) -> list[Obj]:
    status = contents.files.get(DPKG_STATUS)
    if status is None:
        return []
    distro = _os_release(contents)
    qualifier = f"&distro={distro.get('ID', 'debian')}-{distro['VERSION_ID']}" if "VERSION_ID" in distro else ""
    out = []
    for fields in sorted(dpkg_entries(status.decode("utf-8", "replace")), key=lambda f: f["Package"]):
        name, version, arch = fields["Package"], fields["Version"], fields.get("Architecture", "all")
        copyright_file = contents.copyright_of(name)
        comment = f"Debian's copyright file in the image: {copyright_file}" if copyright_file else None
        purl = f"pkg:deb/debian/{name}@{quote(version, safe='')}?arch={arch}{qualifier}"
        out.append(_package(_spdx_id("Deb", name, version, arch), name, version, purl, "NOASSERTION", comment))
    return out


def sbom(path: str, created: float | None = None, contents: Contents | None = None) -> Obj:
    """The SBOM of the image archive at ``path`` (``contents``: what read_image read from it already)."""
    contents = contents or read_image(path)
    labels = contents.config.get("config", {}).get("Labels") or {}
    title = labels.get("org.opencontainers.image.title") or os.path.basename(path)
    version = labels.get("org.opencontainers.image.version", "NOASSERTION")
    image_id = contents.manifest_digest or "sha256:" + _config_digest(path)
    image = _package("SPDXRef-Image", title, version, f"pkg:oci/{title}@{quote(image_id, safe='')}",
                     labels.get("org.opencontainers.image.licenses", "NOASSERTION"), None)  # fmt: skip
    image["primaryPackagePurpose"] = "CONTAINER"
    packages = python_packages(contents) + debian_packages(contents)
    stamp = time.gmtime(created if created is not None else int(os.environ.get("SOURCE_DATE_EPOCH", time.time())))
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{title}-{version}",
        "documentNamespace": f"{SOURCE}/spdx/{title}-{version}-{image_id.split(':', 1)[-1]}",
        "creationInfo": {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", stamp), "creators": ["Tool: airflow-t9k-sbom"]},
        "packages": [image, *packages],
        "relationships": [
            {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": "SPDXRef-Image"},
            *({"spdxElementId": "SPDXRef-Image", "relationshipType": "CONTAINS", "relatedSpdxElement": p["SPDXID"]}
              for p in packages),
        ],
    }  # fmt: skip


def _config_digest(path: str) -> str:
    with tarfile.open(path) as archive:
        (entry, *_) = _json(archive, "manifest.json")
        return str(entry["Config"]).removesuffix(".json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("image", help="an image archive (docker-archive or OCI image layout)")
    ap.add_argument("--out", help="the SBOM's file (default: standard output)")
    args = ap.parse_args(argv)
    doc = sbom(args.image)
    text = json.dumps(doc, indent=2, sort_keys=False) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        kinds = [p["externalRefs"][0]["referenceLocator"].split("/", 1)[0] for p in doc["packages"][1:]]
        print(f"{args.out}: {kinds.count('pkg:pypi')} Python distributions, {kinds.count('pkg:deb')} Debian packages",
              file=sys.stderr)  # fmt: skip
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
