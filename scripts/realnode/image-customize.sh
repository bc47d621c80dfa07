#!/usr/bin/env bash
# mmdebstrap's customize hook for the training image (scripts/realnode/image.sh):
#   image-customize.sh ROOTFS "PIP PACKAGES" "PIP PACKAGES WITHOUT DEPENDENCIES" "THEIR SMALL DEPENDENCIES"
set -euo pipefail
R=$1 PIP=$2 NODEPS=$3 SMALL=$4
in_root() { chroot "$R" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }

# Debian's torch 1.13 on Python 3.11: Std.from_str("0") returns None (iterating an IntFlag
# no longer yields its zero member, Std.NONE), so `torchrun` dies at start with
# "'NoneType' object has no attribute 'get'". Look the value up instead of iterating.
api=$R/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py
grep -q '^            for s in Std:$' "$api"
sed -i 's/^            for s in Std:$/            return Std(v)  # airflow-t9k: Python 3.11 skips Std.NONE when iterating\n            for s in Std:/' "$api"

# pip talks to PyPI from inside the root with the host's name resolution and the host's CA
# bundle (a host may reach PyPI through a TLS proxy of its own); both leave with the build.
cp /etc/resolv.conf "$R/etc/resolv.conf"
cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$R/tmp/host-ca.crt"
pip_install() { in_root env DS_BUILD_OPS=0 python3 -m pip install --cert /tmp/host-ca.crt --quiet --no-cache-dir --break-system-packages --root-user-action=ignore "$@"; }
# shellcheck disable=SC2086
pip_install $PIP
# shellcheck disable=SC2086
pip_install $SMALL
# Both are sdists whose setup imports torch: Debian's, not an isolated build env's download;
# DS_BUILD_OPS=0 keeps DeepSpeed from compiling its CUDA ops.
# shellcheck disable=SC2086
pip_install --no-deps --no-build-isolation $NODEPS
: >"$R/etc/resolv.conf"
rm -f "$R/tmp/host-ca.crt"

# Checks that fail the build, not a test run much later.
in_root python3 -c 'import torch, numpy, xgboost, mpi4py, tensorflow; print("torch", torch.__version__, "numpy", numpy.__version__, "xgboost", xgboost.__version__, "tf", tensorflow.__version__)'
echo 'import os; print("torchrun ok", os.environ["RANK"], os.environ["WORLD_SIZE"])' >"$R/tmp/check.py"
in_root timeout 120 torchrun --standalone --nproc_per_node 2 /tmp/check.py
rm -f "$R/tmp/check.py"
for tool in mpirun sshd ssh pdsh deepspeed colossalai hostname; do in_root sh -c "command -v $tool"; done
rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/*.bin "$R"/root/.cache
