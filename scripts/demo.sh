#!/usr/bin/env bash
# The README's first command: bring the local cluster up, show its Ready kwok nodes,
# and shut it down again. (Later steps extend this to run the retraining DAG.)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
started=0
if ! scripts/local-cluster.sh status >/dev/null 2>&1; then
  scripts/local-cluster.sh up
  started=1
fi
cleanup() { if ((started)) && [[ -z ${T9K_KEEP_CLUSTER:-} ]]; then scripts/local-cluster.sh down; fi; }
trap cleanup EXIT
BIN=$(scripts/local-cluster.sh bin)
"$BIN/kubectl" --kubeconfig .local-cluster/kubeconfig get nodes -o wide
