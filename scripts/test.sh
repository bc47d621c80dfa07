#!/usr/bin/env bash
# `make test`: every pytest tier against one local cluster, in two groups (docs/testing.md,
# "Parallel workers"):
#   1. the parallel group: the cluster's tests not marked `serial`, on T9K_TEST_WORKERS
#      pytest-xdist workers (default 3; `--dist loadgroup` keeps a module that starts Airflow
#      once, and the real-node tests, on one worker each);
#   2. the serial group: the tests that need the cluster to themselves, one at a time; beside
#      it, in one process of its own, the unit tests (no cluster: they take none of its
#      share). The serial group leaves the CPUs two-thirds idle (it waits on leases, Helm and
#      pods), and the parallel group is bound by the CPUs, so the unit tests cost it nothing
#      there; their output is printed once both have ended.
# Arguments are passed to all three pytest runs (e.g. a path, or -k EXPR). The cluster is started
# here when none runs, as the tests' own fixtures would, so both groups share it; it is stopped
# at the end unless T9K_KEEP_CLUSTER is set. A cluster that was already running is left running.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PYTEST=${PYTEST:-$ROOT/.venv/bin/pytest}
# Bytecode written and reused: with PYTHONDONTWRITEBYTECODE set (as on CI's machines) every
# process compiled this checkout's modules from source again, some 500 test controllers (0.26 of
# their 0.73 CPU-seconds from start to stop) and each pytest collection (5 of 12 CPU-seconds, its
# assertion rewriting too). Python writes each file atomically, so concurrent writers are safe.
unset PYTHONDONTWRITEBYTECODE
WORKERS=${T9K_TEST_WORKERS:-3}

if [[ -z ${T9K_TEST_KUBECONFIG:-} ]] && ! scripts/local-cluster.sh status >/dev/null 2>&1; then
  real=(--real-node)
  [[ ${T9K_REAL_NODE:-} == 0 ]] && real=()
  scripts/local-cluster.sh up "${real[@]}" || exit 1
  [[ -n ${T9K_KEEP_CLUSTER:-} ]] || trap 'scripts/local-cluster.sh down' EXIT
fi

# pytest exits 5 when a group selects nothing (a path with no serial test): not a failure.
group() {  # name, pytest arguments...
  local name=$1 t0=$SECONDS rc=0
  shift
  "$PYTEST" "$@" || rc=$?
  echo "[test] $name group took $((SECONDS - t0))s (exit $rc)"
  [[ $rc -eq 5 ]] || "$ROOT/.venv/bin/python" scripts/test-timeline.py --top 25 || true
  [[ $rc -eq 5 ]] && rc=0
  return "$rc"
}

# The deploy tests' images, loaded into the real node's containerd in the background while the
# parallel group runs (it shares the cluster anyway, and the load is mostly disk: a few of its
# CPU-seconds): the deploy tests' fixtures then find them there (rn_import skips what containerd
# has) instead of loading ~700 MB in their setup. Not beside the serial group, which must have
# the cluster to itself: its first test times the controller's recovery from an API-server
# outage, and failed once in CI beside the load (its ~1.4 GB of writes are what etcd's fsyncs
# would wait behind; docs/testing.md, failures). Only archives already built
# (.ci/run builds them); a fixture builds a missing one itself.
preload() {
  local name tar
  for name in controller airflow postgres; do
    tar=$(scripts/local-cluster.sh image tar "$name") && [[ -f $tar ]] && scripts/local-cluster.sh real-node import "$tar"
  done
}
preloading=
if [[ $# -eq 0 && -z ${T9K_TEST_KUBECONFIG:-} ]]; then
  preload >/dev/null 2>&1 &
  preloading=$!
fi

rc=0
group parallel -q -ra -n "$WORKERS" --dist loadgroup -m "integration and not serial" --durations=25 "$@" || rc=1
[[ -z $preloading ]] || wait "$preloading" || true  # a failed preload only costs the fixtures the load

unit_log=$(mktemp "${TMPDIR:-/tmp}/airflow-t9k-unit.XXXXXX")
(
  t0=$SECONDS urc=0
  "$PYTEST" -q -ra -p no:cacheprovider -m "not integration" "$@" || urc=$?
  [[ $urc -eq 5 ]] && urc=0
  echo "[test] unit group (beside the serial group) took $((SECONDS - t0))s (exit $urc)"
  exit "$urc"
) >"$unit_log" 2>&1 &
unit=$!
group serial -q -ra -m serial --durations=25 "$@" || rc=1
wait "$unit" || rc=1
cat "$unit_log"
rm -f "$unit_log"
exit "$rc"
