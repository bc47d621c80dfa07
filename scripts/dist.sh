#!/usr/bin/env bash
# `make dist`: a release's artifacts in dist/, built from the committed HEAD (a `git archive` of
# it, never the work tree), so what is released is what a tag names (docs/development.md, "Releases").
#
#   dist/airflow_t9k-V.tar.gz, dist/airflow_t9k-V-py3-none-any.whl    the sdist and the wheel (python -m build)
#   dist/airflow-t9k-V.tgz                                            the chart, version and appVersion V
#   dist/airflow-t9k-controller-V.oci.tar, ...-airflow-V.oci.tar      the images, OCI image layout archives
#   dist/airflow-t9k-controller-V.spdx.json, ...-airflow-V.spdx.json  their SBOMs (scripts/sbom.py)
#   dist/SHA256SUMS                                                   the checksums of all of the above
#
# V is pyproject.toml's version. The environment may set:
#   IMAGES=0          no images, no SBOMs (they need root and mmdebstrap, and a few minutes)
#   IMAGE_REPO=R      the images are R/controller:V and R/airflow:V, and the chart's default image is
#                     R/controller (default ghcr.io/airflow-t9k/airflow-t9k)
#   ALLOW_DIRTY=1     build HEAD even when tracked files have uncommitted changes (they are left out)
#   RELEASE_TAG=vV    fail unless the tag names pyproject.toml's version (the release workflow sets it)
#   T9K_HELM=PATH     the Helm binary (default: scripts/local-cluster.sh helm, built on first use)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${DIST_DIR:-$ROOT/dist}
IMAGES=${IMAGES:-1}
IMAGE_REPO=${IMAGE_REPO:-ghcr.io/airflow-t9k/airflow-t9k}
PY=${T9K_PYTHON:-$ROOT/.venv/bin/python}
log() { echo "[dist] $*" >&2; }
die() { log "error: $*"; exit 1; }

# A release is a commit: changes to tracked files would not be in it, so they stop the build
# (unless asked); untracked files never are, which is only said.
changed=$(git -C "$ROOT" status --porcelain --untracked-files=no)
if [[ -n $changed ]]; then
  [[ ${ALLOW_DIRTY:-0} == 1 ]] || die "uncommitted changes (commit them, or ALLOW_DIRTY=1 to build HEAD without them):
$changed"
  log "warning: building HEAD; these uncommitted changes are NOT in it:"$'\n'"$changed"
fi
untracked=$(git -C "$ROOT" status --porcelain --untracked-files=normal | sed -n 's/^?? //p')
[[ -z $untracked ]] || log "note: untracked files are not in the release: $(echo "$untracked" | tr '\n' ' ')"
if ((IMAGES)); then
  ((EUID == 0)) || die "the images are built with mmdebstrap and chroot: run as root, or IMAGES=0"
  command -v mmdebstrap >/dev/null || die "no mmdebstrap (apt-get install mmdebstrap), or IMAGES=0"
fi
"$PY" -m build --version >/dev/null 2>&1 || die "$PY has no 'build' module: make setup (the [release] extra)"

REVISION=$(git -C "$ROOT" rev-parse HEAD)
# The wheel's members and the SBOMs are stamped with the commit's time (the sdist's generated files, PKG-INFO
# and *.egg-info, keep setuptools' own).
SOURCE_DATE_EPOCH=$(git -C "$ROOT" log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH
WORK=$(mktemp -d "${TMPDIR:-/tmp}/airflow-t9k-dist.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
SRC=$WORK/src
mkdir -p "$SRC" "$WORK/chart"
git -C "$ROOT" archive --format=tar HEAD | tar -x -C "$SRC"
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$SRC/pyproject.toml" | head -1)
[[ -n $VERSION ]] || die "no version in pyproject.toml"
[[ -z ${RELEASE_TAG:-} || $RELEASE_TAG == "v$VERSION" ]] || die "tag $RELEASE_TAG is not v$VERSION (pyproject.toml's version)"
log "airflow-t9k $VERSION from $(git -C "$ROOT" rev-parse --short HEAD) into $OUT"
rm -rf "$OUT"
mkdir -p "$OUT"

# The sdist, and the wheel built from it (what pip does with the sdist), in build's isolated
# environment (setuptools from PyPI, as pyproject.toml's [build-system] asks).
"$PY" -m build --outdir "$OUT" "$SRC" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; die "python -m build failed"; }
wheel=$OUT/airflow_t9k-$VERSION-py3-none-any.whl
[[ -f $wheel && -f $OUT/airflow_t9k-$VERSION.tar.gz ]] || die "python -m build made $(ls "$OUT"), not the $VERSION sdist and wheel"
log "$(basename "$OUT/airflow_t9k-$VERSION.tar.gz"), $(basename "$wheel")"

# The chart: the generated files (CRDs, plain manifests, licence copies) current at this commit,
# its default image the released one, its version and appVersion the package's.
HELM=${T9K_HELM:-$("$SRC/scripts/local-cluster.sh" helm)}
T9K_HELM=$HELM "$PY" "$SRC/scripts/gen_chart.py" --check >&2 || die "the chart's generated files are not current at HEAD (scripts/gen_chart.py)"
cp -r "$SRC/deploy/chart/airflow-t9k" "$WORK/chart/"
"$PY" - "$WORK/chart/airflow-t9k/values.yaml" "$IMAGE_REPO/controller" <<'EOF'
import re, sys
path, repo = sys.argv[1:]
text = open(path).read()
# The one line that names the controller's local image (scripts/local-cluster.sh builds it).
new, n = re.subn(r"^(\s+repository:\s*)localhost/airflow-t9k/controller(\s*(#.*)?)$", rf"\g<1>{repo}\g<2>", text, flags=re.M)
if n != 1:
    sys.exit(f"{path}: expected one 'repository: localhost/airflow-t9k/controller' line, found {n}")
open(path, "w").write(new)
EOF
"$HELM" lint --strict "$WORK/chart/airflow-t9k" >"$WORK/lint.log" 2>&1 || { cat "$WORK/lint.log" >&2; die "helm lint failed"; }
"$HELM" package "$WORK/chart/airflow-t9k" --version "$VERSION" --app-version "$VERSION" --destination "$OUT" >&2

# The images, from the wheel above (the same bytes PyPI gets), with their SBOMs.
if ((IMAGES)); then
  for name in controller airflow; do
    archive=$OUT/airflow-t9k-$name-$VERSION.oci.tar
    IMAGE_FORMAT=oci PACKAGE_WHEEL=$wheel IMAGE_REVISION=$REVISION T9K_PYTHON=$PY \
      bash "$SRC/scripts/images/build.sh" "$name" "$archive" "$IMAGE_REPO/$name:$VERSION"
    python3 "$SRC/scripts/sbom.py" "$archive" --out "$OUT/airflow-t9k-$name-$VERSION.spdx.json"
  done
else
  log "IMAGES=0: no images and no SBOMs"
fi

(cd "$OUT" && sha256sum -- * >"$WORK/SHA256SUMS" && mv "$WORK/SHA256SUMS" SHA256SUMS)
log "done:"
(cd "$OUT" && ls -l) >&2
