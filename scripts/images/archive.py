#!/usr/bin/env python3
"""Wrap a root filesystem tarball as a one-layer image archive that ``ctr images import`` reads,
with an entrypoint, a command, a user and an environment (scripts/images/build.sh).

    archive.py ROOTFS.tar NAME:TAG [NAME:TAG ...] --out OUT.tar [--entrypoint JSON] [--cmd JSON]
               [--user UID:GID] [--env K=V ...] [--workdir DIR] [--label K=V ...]

The layout is the docker-archive one of scripts/realnode/mkimage.py (whose helpers it uses; that
file stays as it is, since its content names the training image's cache entry).
"""

from __future__ import annotations

import argparse
import hashlib
import json
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
    args = ap.parse_args(argv)
    layer = digest_of(args.rootfs)
    blob = config(layer, args)
    name = hashlib.sha256(blob).hexdigest() + ".json"
    manifest = [{"Config": name, "RepoTags": args.refs, "Layers": [f"{layer}/layer.tar"]}]
    with tarfile.open(args.out, "w") as archive:
        add_bytes(archive, name, blob, 0)
        archive.add(args.rootfs, arcname=f"{layer}/layer.tar")
        add_bytes(archive, "manifest.json", json.dumps(manifest).encode(), 0)
    print(f"{args.out}: {' '.join(args.refs)} layer sha256:{layer} image sha256:{name[:-5]}")


if __name__ == "__main__":
    main()
