#!/usr/bin/env bash
# Build the real node's training image from Debian packages and PyPI, without Docker or a
# registry: mmdebstrap makes the root filesystem, mkimage.py wraps it as an importable archive.
#
#   image.sh WORKDIR OUT.tar NAME:TAG    (NAME ends in /train; NAME's prefix/argv-env:1 comes along)
#
# Contents (docs/real-node.md): python3, torch (Debian's 1.13, CPU; torchrun fixed for Python
# 3.11, see below), numpy, xgboost, mpi4py with Open MPI (mpirun in /usr/bin), openssh server
# and client, pdsh; from PyPI: TensorFlow (CPU) and the DeepSpeed and ColossalAI launchers.
# Debian's mirror comes from the host's own apt sources, so the image follows the host's.
set -euo pipefail
WORK=$1 OUT=$2 REF=$3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SUITE=bookworm

sources() {  # the host's Debian sources, as a file mmdebstrap reads
  local f
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    [[ -s $f ]] && grep -qE '^[^#]*(deb|URIs)' "$f" && { echo "$f"; return; }
  done
  echo "no Debian apt sources on this host (/etc/apt/sources.list.d/debian.sources)" >&2
  exit 1
}

PACKAGES=(python3 python3-numpy python3-torch python3-xgboost python3-mpi4py openmpi-bin
  openssh-server openssh-client pdsh iproute2 procps netbase ca-certificates python3-pip)

# PyPI packages, pinned to what runs with Debian's torch 1.13 and numpy on Python 3.11. pip's
# dependency resolver would replace Debian's torch with PyPI's (CUDA, gigabytes), so the two
# launchers install without dependencies and their own small ones are listed.
PIP_PACKAGES=("tensorflow-cpu==2.15.1" "numpy<2")
PIP_NODEPS=("deepspeed==0.12.6" "colossalai==0.3.6")
PIP_SMALL=(hjson ninja psutil py-cpuinfo "pydantic<2" tqdm packaging click fabric contexttimer rich)

rm -rf "$WORK" && mkdir -p "$WORK"
nice -n 10 mmdebstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="bash $HERE/image-customize.sh \"\$1\" '${PIP_PACKAGES[*]}' '${PIP_NODEPS[*]}' '${PIP_SMALL[*]}'" \
  "$SUITE" "$WORK/rootfs.tar" "$(sources)"
# sshd's privilege separation directory: an init script makes it on a host, and mmdebstrap's
# hooks see a /run that does not end up in the archive, so it is added to the archive itself.
python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1], "a") as t:
    info = tarfile.TarInfo("./run/sshd"); info.type = tarfile.DIRTYPE; info.mode = 0o755
    t.addfile(info)' "$WORK/rootfs.tar"
# A variant on the same layer prints what it was started with (argv, environment) and sleeps
# T9K_DUMP_SLEEP seconds: for launch paths whose command is fixed by the controller and an
# image's entrypoint, such as BeamJob's Flink pods (args jobmanager / taskmanager).
DUMP='import json, os, sys, time; print("argv " + json.dumps(sys.argv[1:]), flush=True); print("env " + json.dumps(dict(os.environ), sort_keys=True), flush=True); time.sleep(float(os.environ.get("T9K_DUMP_SLEEP", "0")))'
python3 "$HERE/mkimage.py" "$WORK/rootfs.tar" "$REF" --out "$OUT.tmp" --cmd '["python3"]' --workdir /root \
  --variant "${REF%%/train:*}/argv-env:1=$(python3 -c 'import json, sys; print(json.dumps(["python3", "-c", sys.argv[1]]))' "$DUMP")"
mv -f "$OUT.tmp" "$OUT"
rm -rf "$WORK"
