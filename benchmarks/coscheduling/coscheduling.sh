#!/usr/bin/env bash
# A second kube-scheduler with the scheduler-plugins' Coscheduling plugin: the gang Kubeflow's
# training operator schedules through (--gang-scheduler-name), for benchmarks/vs_kubeflow.py's
# gang-against-gang runs (variant kf-gang). Not part of the tests or CI.
#
#   benchmarks/coscheduling/coscheduling.sh build      build into ~/.cache/airflow-t9k/coscheduling-<version>/bin (niced)
#   benchmarks/coscheduling/coscheduling.sh install    the PodGroup CRD (scheduling.x-k8s.io/v1alpha1), idempotent
#   benchmarks/coscheduling/coscheduling.sh start | stop | status | log | uninstall
#
# scheduler-plugins v0.34.1-devel (the newest release the module proxy serves here; it builds
# kube-scheduler v1.34.1's framework) in this directory's Go module. It serves one profile,
# schedulerName scheduler-plugins-scheduler (upstream chart's name), with Coscheduling enabled
# as upstream's manifests/coscheduling/scheduler-config.yaml does, and the same client limits
# as the cluster's own kube-scheduler (QPS 200, burst 400), so the two gangs differ only in
# how they gang.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VERSION=v0.34.1-devel
CACHE=${T9K_CLUSTER_CACHE:-$HOME/.cache/airflow-t9k}
CS_BIN=$CACHE/coscheduling-$VERSION/bin
K8S_BIN=$CACHE/k8s-v1.36.3/bin
STATE=${T9K_CLUSTER_STATE:-$ROOT/.local-cluster}/coscheduling
PKI=${T9K_CLUSTER_STATE:-$ROOT/.local-cluster}/pki
KC=${KUBECONFIG:-${T9K_CLUSTER_STATE:-$ROOT/.local-cluster}/kubeconfig}
P_SECURE=${T9K_PORT_COSCHEDULING:-39259}
SCHEDULER_NAME=scheduler-plugins-scheduler
# How long a gang's first pods wait in Permit for the rest (upstream's manifest says 10).
PERMIT_WAIT=${T9K_COSCHEDULING_PERMIT_WAIT:-60}

NAME=coscheduling
BIN=$CS_BIN/coscheduling-bench
# shellcheck source=../_gobench.sh
source "$HERE/../_gobench.sh"
kubectl_() { "$K8S_BIN/kubectl" --kubeconfig "$KC" "$@"; }

install() {
  [[ -f $KC ]] || die "no kubeconfig at $KC; is the local cluster up (scripts/local-cluster.sh up)?"
  kubectl_ apply --server-side --force-conflicts -f "$(module_dir sigs.k8s.io/scheduler-plugins)/manifests/coscheduling/crd.yaml" >/dev/null
  kubectl_ wait --for condition=Established --timeout=60s crd/podgroups.scheduling.x-k8s.io >/dev/null
  log "installed: the PodGroup CRD (scheduling.x-k8s.io)"
}

uninstall() {
  stop
  kubectl_ delete -f "$(module_dir sigs.k8s.io/scheduler-plugins)/manifests/coscheduling/crd.yaml" --ignore-not-found >/dev/null
  log "uninstalled"
}

start() {
  alive && { log "already running (pid $(pid))"; return 0; }
  built || die "not built; run: $0 build"
  kubectl_ get crd podgroups.scheduling.x-k8s.io >/dev/null 2>&1 || install
  port_in_use "$P_SECURE" && die "port $P_SECURE is in use; stop its owner or set T9K_PORT_COSCHEDULING"
  mkdir -p "$STATE"
  cat >"$STATE/config.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: $KC
  qps: 200
  burst: 400
profiles:
- schedulerName: $SCHEDULER_NAME
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: $PERMIT_WAIT
YAML
  # Its /metrics to the admin's token, as the cluster's kube-scheduler serves them.
  "$BIN" --config "$STATE/config.yaml" --bind-address 127.0.0.1 \
    --secure-port "$P_SECURE" --authentication-kubeconfig "$KC" --authorization-kubeconfig "$KC" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    "$@" >"$STATE/scheduler.log" 2>&1 </dev/null &
  echo $! >"$STATE/pid"
  wait_ready "$STATE/scheduler.log" healthy
}

healthy() { curl -fsk "https://127.0.0.1:$P_SECURE/healthz" >/dev/null 2>&1; }

case ${1:-} in
  build) build "kube-scheduler with Coscheduling ($VERSION)" ;;
  install) install ;;
  uninstall) uninstall ;;
  start) shift; start "$@" ;;
  stop) stop ;;
  status) status ;;
  log) cat "$STATE/scheduler.log" ;;
  pid) pid ;;
  *) sed -n '2,9p' "$0" >&2; exit 2 ;;
esac
