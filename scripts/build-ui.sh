#!/usr/bin/env bash
# Builds the UI's JavaScript (ui/src) into airflow_t9k/ui/static with esbuild from the npm
# registry (ui/package-lock.json pins it). The built bundles are committed, so installing or
# testing the package needs no node; run this after editing ui/src and commit both.
#   scripts/build-ui.sh          build into airflow_t9k/ui/static
#   scripts/build-ui.sh --check  build into a temporary directory; fail if the committed
#                                bundles differ from what the source builds
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATIC=$ROOT/airflow_t9k/ui/static
command -v npm >/dev/null || { echo "build-ui: npm is required (apt-get install -y nodejs npm)" >&2; exit 2; }
cd "$ROOT/ui"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
if [[ ${1:-} != --check ]]; then
  T9K_UI_OUT=$STATIC node build.mjs
  exit 0
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
T9K_UI_OUT=$OUT node build.mjs 2>/dev/null
status=0
for f in "$OUT"/*.js; do
  name=$(basename "$f")
  if ! cmp -s "$f" "$STATIC/$name"; then
    echo "build-ui: airflow_t9k/ui/static/$name differs from what ui/src builds; run scripts/build-ui.sh and commit" >&2
    status=1
  fi
done
exit $status
