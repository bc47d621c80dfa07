#!/usr/bin/env python3
"""Wrap a root filesystem tarball as a one-layer image archive that ``ctr images import`` reads,
with an entrypoint, a command, a user and an environment (scripts/images/build.sh).

    archive.py ROOTFS.tar NAME:TAG [NAME:TAG ...] --out OUT.tar [--entrypoint JSON] [--cmd JSON]
               [--user UID:GID] [--env K=V ...] [--workdir DIR] [--label K=V ...] [--oci]

The layout is the docker-archive one of scripts/realnode/mkimage.py (whose helpers it uses; that
file stays as it is, since its content names the training image's cache entry). With --oci it is
an OCI image layout (oci-layout, index.json, blobs/sha256/) with the layer gzipped, the archive
`skopeo copy oci-archive:OUT.tar docker://REF` pushes to a registry (make dist).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "realnode"))

from mkimage import PATH, add_bytes, digest_of


def config(layer: str, args: argparse.Namespace) -> bytes:
    runtime: dict[str, object] = {"Env": [PATH, *args.env], "WorkingDir": args.workdir}
    if args.entrypoint:
        runtime["Entrypoint"] = json.loads(args.entrypoint)
    if args.cmd:
        runtime["Cmd"] = json.loads(args.cmd)
    if args.user:
        runtime["User"] = args.user
    if args.label:
        runtime["Labels"] = dict(label.split("=", 1) for label in args.label)
    doc = {
        "architecture": "amd64",
        "os": "linux",
        # A fixed time: the same layer and settings make the same image id, so an unchanged
        # rebuild is a no-op import.
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(0)),
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer}"]},
    }
    return json.dumps(doc, sort_keys=True).encode()


OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def gzipped(path: str, out: str) -> str:
    """``path`` gzipped into ``out`` with no name or time in its header (the same layer makes the
    same blob); returns the blob's digest."""
    with open(path, "rb") as src, open(out, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
            shutil.copyfileobj(src, gz, 1 << 20)
    return digest_of(out)


def descriptor(media_type: str, digest: str, size: int) -> dict[str, object]:
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": size}


def write_oci(args: argparse.Namespace, config_blob: bytes) -> str:
    """The OCI image layout archive; returns the manifest's digest."""
    layer_gz = args.out + ".layer.gz"
    try:
        layer_digest = gzipped(args.rootfs, layer_gz)
        config_digest = hashlib.sha256(config_blob).hexdigest()
        manifest: dict[str, object] = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor(OCI_CONFIG, config_digest, len(config_blob)),
            "layers": [descriptor(OCI_LAYER_GZIP, layer_digest, os.path.getsize(layer_gz))],
        }
        # The labels as annotations too: a registry shows those (GHCR: the description and source).
        if args.label:
            manifest["annotations"] = dict(label.split("=", 1) for label in args.label)
        manifest_blob = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = hashlib.sha256(manifest_blob).hexdigest()
        # One entry per reference, as containerd exports them: the tag as ref.name (what skopeo's
        # oci-archive:FILE:TAG selects), the whole reference for containerd's import.
        entries = []
        for ref in args.refs:
            last = ref.rsplit("/", 1)[-1]  # a registry's port is no tag
            tag = last.rpartition(":")[2] if ":" in last else "latest"
            annotations = {"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": ref}
            entries.append({**descriptor(OCI_MANIFEST, manifest_digest, len(manifest_blob)), "annotations": annotations})
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries}
        with tarfile.open(args.out, "w") as archive:
            add_bytes(archive, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode(), 0)
            add_bytes(archive, "index.json", json.dumps(index, sort_keys=True).encode(), 0)
            add_bytes(archive, f"blobs/sha256/{manifest_digest}", manifest_blob, 0)
            add_bytes(archive, f"blobs/sha256/{config_digest}", config_blob, 0)
            info = archive.gettarinfo(layer_gz, arcname=f"blobs/sha256/{layer_digest}")
            info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
            with open(layer_gz, "rb") as f:
                archive.addfile(info, f)
    finally:
        if os.path.exists(layer_gz):
            os.unlink(layer_gz)
    return manifest_digest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rootfs")
    ap.add_argument("refs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--entrypoint")
    ap.add_argument("--cmd")
    ap.add_argument("--user")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--label", action="append", default=[])
    ap.add_argument("--workdir", default="/")
    ap.add_argument("--oci", action="store_true", help="an OCI image layout archive, the layer gzipped")
    args = ap.parse_args(argv)
    layer = digest_of(args.rootfs)
    blob = config(layer, args)
    if args.oci:
        manifest_digest = write_oci(args, blob)
        print(f"{args.out}: {' '.join(args.refs)} (OCI) layer sha256:{layer} manifest sha256:{manifest_digest}")
        return
    name = hashlib.sha256(blob).hexdigest() + ".json"
    manifest = [{"Config": name, "RepoTags": args.refs, "Layers": [f"{layer}/layer.tar"]}]
    with tarfile.open(args.out, "w") as archive:
        add_bytes(archive, name, blob, 0)
        archive.add(args.rootfs, arcname=f"{layer}/layer.tar")
        add_bytes(archive, "manifest.json", json.dumps(manifest).encode(), 0)
    print(f"{args.out}: {' '.join(args.refs)} layer sha256:{layer} image sha256:{name[:-5]}")


if __name__ == "__main__":
    main()
