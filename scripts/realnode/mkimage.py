#!/usr/bin/env python3
"""Wrap a root filesystem tarball as a one-layer image archive that ``ctr images import`` reads.

The real node's images are built from Debian packages (mmdebstrap), not pulled: no registry
and no Docker. The archive is the docker-archive layout (manifest.json, a config blob and
the layer), the simplest one containerd imports.

    mkimage.py ROOTFS.tar NAME:TAG [NAME:TAG ...] --out OUT.tar [--cmd JSON] [--env K=V ...] [--workdir DIR]
               [--variant NAME:TAG=ENTRYPOINT_JSON ...]

A variant is another image on the same layer that differs only in its entrypoint (the layer is
stored once, in the archive and in containerd).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
import time

PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def digest_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def add_bytes(archive: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = mtime
    archive.addfile(info, io.BytesIO(data))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rootfs")
    ap.add_argument("refs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cmd", default='["/bin/sh"]')
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--workdir", default="/")
    ap.add_argument("--variant", action="append", default=[])
    args = ap.parse_args()

    layer = digest_of(args.rootfs)
    # A fixed creation time keeps the image id stable for the same layer: an unchanged
    # rebuild is then a no-op import.
    mtime = 0
    images = [(args.refs, None)]
    for variant in args.variant:
        ref, _, entrypoint = variant.partition("=")
        images.append(([ref], json.loads(entrypoint)))
    manifest, configs = [], {}
    for refs, entrypoint in images:
        runtime = {
            "Env": [PATH, *args.env],
            "Cmd": json.loads(args.cmd) if entrypoint is None else [],
            "WorkingDir": args.workdir,
        }
        if entrypoint is not None:
            runtime["Entrypoint"] = entrypoint
        config = {
            "architecture": "amd64",
            "os": "linux",
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime)),
            "config": runtime,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer}"]},
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
        configs[config_name] = config_bytes
        manifest.append({"Config": config_name, "RepoTags": refs, "Layers": [f"{layer}/layer.tar"]})
    with tarfile.open(args.out, "w") as archive:
        for name, data in configs.items():
            add_bytes(archive, name, data, mtime)
        archive.add(args.rootfs, arcname=f"{layer}/layer.tar")
        add_bytes(archive, "manifest.json", json.dumps(manifest).encode(), mtime)
    print(f"{args.out}: {' '.join(r for refs, _ in images for r in refs)} layer sha256:{layer}")


if __name__ == "__main__":
    main()
