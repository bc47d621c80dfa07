#!/usr/bin/env bash
# Build an image of this package from Debian packages and PyPI wheels, without Docker or a
# registry: mmdebstrap makes the root filesystem, archive.py wraps it as an archive that
# `ctr images import` reads (scripts/local-cluster.sh image build|import NAME; docs/install.md).
#
#   build.sh NAME OUT.tar REF      (the recipe is scripts/images/NAME.conf)
#
# The environment may set:
#   IMAGE_FORMAT=oci       an OCI image layout archive (skopeo's oci-archive:) instead of a docker-archive (make dist)
#   PACKAGE_WHEEL=FILE     install this wheel of the package instead of building one (make dist: the released one)
#   IMAGE_REVISION=SHA     the org.opencontainers.image.revision label (make dist: the commit)
#   RESOLVE_ONLY=1         build nothing: write to OUT the versions pip resolves for the recipe, as a
#                          constraints file (scripts/images/airflow-constraints-*.txt; docs/development.md)
#
# A recipe names the Debian packages, this package's extras (or no package at all: WITH_PACKAGE=0,
# e.g. the Airflow tests' PostgreSQL), more wheels to install beside it, the entrypoint, the user,
# the directories a pod mounts writable, and the imports to check. The package is built into a wheel from a copy of the checkout (which stays
# clean); the host's pip installs it with its dependencies, as wheels for the image's Python and
# platform only (no compiler runs), into /usr/local/lib/python3.X/dist-packages of the image, and
# the image's own python3 byte-compiles them, so nothing is written at run time.
set -euo pipefail
NAME=$1 OUT=$2 REF=$3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SUITE=bookworm
PY_VERSION=3.11  # bookworm's python3
RECIPE=$HERE/$NAME.conf
[[ -f $RECIPE ]] || { echo "no recipe $RECIPE" >&2; exit 2; }
# What a recipe may leave unset.
WITH_PACKAGE=1 PACKAGE_EXTRAS="" EXCLUDE_DEPENDENCIES=() EXTRA_REQUIREMENTS=() CONSTRAINTS="" DPKG_EXCLUDES=() IMAGE_ENV=() WRITABLE_PATHS=()
# shellcheck source=controller.conf
source "$RECIPE"

sources() {  # the host's Debian sources, as a file mmdebstrap reads
  local f
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    [[ -s $f ]] && grep -qE '^[^#]*(deb|URIs)' "$f" && { echo "$f"; return; }
  done
  echo "no Debian apt sources on this host (/etc/apt/sources.list.d/debian.sources)" >&2
  exit 1
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/airflow-t9k-image-$NAME.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
t0=$SECONDS
SITE=usr/local/lib/python$PY_VERSION/dist-packages
mkdir -p "$WORK/site"

if ((WITH_PACKAGE)); then
  PY=${T9K_PYTHON:-}
  for p in "$PY" "$ROOT/.venv/bin/python" python3; do
    [[ -n $p ]] && "$p" -m pip --version >/dev/null 2>&1 && { PY=$p; break; }
  done
  "$PY" -m pip --version >/dev/null 2>&1 || { echo "building an image needs python3 with pip ('make setup' makes .venv)" >&2; exit 1; }

  mkdir -p "$WORK/src" "$WORK/wheels"
  if [[ -n ${PACKAGE_WHEEL:-} ]]; then
    cp "$PACKAGE_WHEEL" "$WORK/wheels/"
  else
    # The wheel, from a copy: setuptools builds in the source tree (build/, *.egg-info).
    cp -r "$ROOT/pyproject.toml" "$ROOT/README.md" "$ROOT/LICENSE" "$ROOT/NOTICE" "$ROOT/airflow_t9k" "$WORK/src/"
    find "$WORK/src" -name __pycache__ -prune -exec rm -rf {} +
    "$PY" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/wheels" "$WORK/src"
  fi
  wheel=$(ls "$WORK"/wheels/*.whl)
  echo "[image] $NAME: ${PACKAGE_WHEEL:+given }$(basename "$wheel") in $((SECONDS - t0))s" >&2

  # The image's site-packages: this package and its dependencies (less the recipe's exclusions),
  # and the recipe's extra requirements, binary wheels for the image only.
  PIP_TARGET_ARGS=(--only-binary=:all: --implementation cp --python-version "$PY_VERSION"
    --abi "cp${PY_VERSION/./}" --abi abi3 --abi none --platform manylinux_2_36_x86_64 --platform manylinux_2_28_x86_64
    --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform linux_x86_64 --platform any)
  pip_target() {  # DIR ARGS...; --isolated: no user or site configuration; no checks against the host's own packages
    local dir=$1
    shift
    "$PY" -m pip install --quiet --isolated --no-compile --no-warn-script-location --no-warn-conflicts \
      --disable-pip-version-check ${PIP_CERT:+--cert "$PIP_CERT"} --target "$dir" "${PIP_TARGET_ARGS[@]}" "$@"
  }
  # The wheel's own requirements (and its extras'), less the excluded ones, resolved by pip in one
  # go with the recipe's extra ones (so they agree).
  mapfile -t requirements < <(python3 "$HERE/requirements.py" "$wheel" --extras "$PACKAGE_EXTRAS" --exclude "${EXCLUDE_DEPENDENCIES[@]}")
  requirements+=("${EXTRA_REQUIREMENTS[@]}")
  if [[ ${RESOLVE_ONLY:-0} == 1 ]]; then
    pip_target "$WORK/deps" --dry-run --ignore-installed --report "$WORK/report.json" "${requirements[@]}"
    python3 "$HERE/constraints.py" "$WORK/report.json" --recipe "$NAME" >"$OUT"
    echo "[image] $NAME: $(grep -c '==' "$OUT") versions pinned in $OUT" >&2
    exit 0
  fi
  # The recipe's constraints (Airflow's, for its image) hold every version the resolution may pick.
  [[ -z $CONSTRAINTS ]] || requirements+=(--constraint "$HERE/$CONSTRAINTS")
  # Two installs into two directories, merged: pip --target skips a top-level directory that
  # already exists (bin/, with the second install's console scripts such as `airflow`).
  pip_target "$WORK/site" --no-deps "$wheel"
  if ((${#requirements[@]})); then
    pip_target "$WORK/deps" "${requirements[@]}"
    cp -a "$WORK/deps/." "$WORK/site/"
  fi
  echo "[image] $NAME: $(ls "$WORK/site" | grep -c 'dist-info$') distributions (${EXCLUDE_DEPENDENCIES[*]:-nothing} left out), $(du -sh "$WORK/site" | cut -f1) in $((SECONDS - t0))s" >&2
fi

excludes=()
for x in '/usr/share/man/*' '/usr/share/doc/*' '/usr/share/locale/*' '/usr/share/info/*' "${DPKG_EXCLUDES[@]}"; do
  excludes+=(--dpkgopt="path-exclude=$x")  # patterns for dpkg, never expanded here
done
# Less the packages' copyright files: their licences (GPL's, for one) ask that they travel with the
# binaries; the SBOM (scripts/sbom.py) points at them. A few hundred KB.
excludes+=(--dpkgopt='path-include=/usr/share/doc/*/copyright')
# merged-usr: the /usr symlinks made directly (bookworm's default would install usrmerge, and perl with it).
nice -n 10 mmdebstrap --quiet --variant=minbase --include="$(IFS=,; echo "${DEBIAN_PACKAGES[*]}")" \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr "${excludes[@]}" \
  --customize-hook="bash '$HERE/customize.sh' \"\$1\" '$WORK/site' '$SITE' '$RECIPE'" \
  "$SUITE" "$WORK/rootfs.tar" "$(sources)"
echo "[image] $NAME: root filesystem $(du -sh "$WORK/rootfs.tar" | cut -f1) in $((SECONDS - t0))s" >&2

envs=()
((WITH_PACKAGE)) && envs+=(--env PYTHONDONTWRITEBYTECODE=1 --env PYTHONUNBUFFERED=1)
for e in "${IMAGE_ENV[@]}"; do envs+=(--env "$e"); done
# The OCI labels (labels.py, which deploy/Containerfile's match): source, licences, version, title, description.
mapfile -t labels < <(python3 "$HERE/labels.py" "$NAME" ${IMAGE_REVISION:+--revision "$IMAGE_REVISION"})
for l in "${labels[@]}"; do envs+=(--label "$l"); done
[[ ${IMAGE_FORMAT:-docker} == oci ]] && envs+=(--oci)
python3 "$HERE/archive.py" "$WORK/rootfs.tar" "$REF" --out "$OUT.tmp" --entrypoint "$ENTRYPOINT" --cmd "$CMD" \
  --user "$IMAGE_USER:$IMAGE_USER" "${envs[@]}" --workdir /
mv -f "$OUT.tmp" "$OUT"
echo "[image] $NAME: $REF, $(du -sh "$OUT" | cut -f1), built in $((SECONDS - t0))s" >&2
