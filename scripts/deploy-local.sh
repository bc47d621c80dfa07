#!/usr/bin/env bash
# `make deploy-local` / `make undeploy-local`: the Helm chart on the local cluster, as a platform
# team installs it (docs/install.md).
#
#   scripts/deploy-local.sh up     start the cluster with the real node if none runs; build the
#                                  controller's image and Helm (cached), import the image into the
#                                  real node, install or upgrade release airflow-t9k in
#                                  airflow-t9k-system with the pods on the real node, wait for the
#                                  rollout, and print what it installed
#   scripts/deploy-local.sh down   uninstall the release and delete its namespace; CRDs and users'
#                                  jobs stay (the chart keeps them)
#
# Extra arguments go to `helm upgrade --install` (e.g. --set scope.mode=all).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LC=$ROOT/scripts/local-cluster.sh
RELEASE=${T9K_RELEASE:-airflow-t9k}
NS=${T9K_RELEASE_NAMESPACE:-airflow-t9k-system}
CHART=$ROOT/deploy/chart/airflow-t9k
log() { echo "[deploy-local] $*" >&2; }
die() { log "error: $*"; exit 1; }

kubectl_() { "$("$LC" bin)/kubectl" --kubeconfig "$ROOT/.local-cluster/kubeconfig" "$@"; }

up() {
  local t0=$SECONDS
  if ! "$LC" status >/dev/null 2>&1; then
    log "no local cluster runs: starting one with the real node"
    "$LC" up --real-node
  fi
  kubectl_ get node real-node-0 >/dev/null 2>&1 ||
    die "the running cluster has no real node: 'scripts/local-cluster.sh down', then 'make deploy-local' (or 'up --real-node')"
  local helm ref
  helm=$("$LC" helm)
  ref=$("$LC" image import controller)
  log "image $ref and Helm ready after $((SECONDS - t0))s; installing release $RELEASE in $NS"
  # --take-ownership: CRDs applied before by `airflow-t9k crds | kubectl apply` (the tests, make
  # demo) become the release's, as docs/install.md tells a cluster that had them; --force-conflicts
  # takes over the fields those writers own (Helm 4 applies server-side).
  KUBECONFIG=$ROOT/.local-cluster/kubeconfig "$helm" upgrade --install "$RELEASE" "$CHART" --namespace "$NS" --create-namespace \
    --values "$ROOT/deploy/chart/values-local.yaml" --set image.repository="${ref%:*}" --set image.tag="${ref##*:}" \
    --take-ownership --force-conflicts --wait --timeout 5m "$@"
  kubectl_ -n "$NS" rollout status "deployment/$RELEASE-controller" --timeout 120s >/dev/null
  echo
  KUBECONFIG=$ROOT/.local-cluster/kubeconfig "$helm" list --namespace "$NS"
  echo
  kubectl_ -n "$NS" get deployment,poddisruptionbudget,serviceaccount,role,rolebinding,lease -l "app.kubernetes.io/instance=$RELEASE" 2>/dev/null || true
  kubectl_ -n "$NS" get pods -o wide
  kubectl_ get clusterrole,clusterrolebinding -l "app.kubernetes.io/instance=$RELEASE"
  kubectl_ get crd -l app.kubernetes.io/part-of=airflow-t9k -o custom-columns=CRD:.metadata.name,KEPT:'.metadata.annotations.helm\.sh/resource-policy'
  echo
  log "leader: $(kubectl_ -n "$NS" get lease "$RELEASE-controller" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || echo '(none yet)')"
  log "deployed in $((SECONDS - t0))s: $ref; jobs run in namespaces labelled airflow-t9k.io/jobs=enabled" \
    "(kubectl label namespace NAME airflow-t9k.io/jobs=enabled)"
}

down() {
  "$LC" status >/dev/null 2>&1 || { log "no local cluster runs: nothing to remove"; return 0; }
  local helm
  helm=$("$LC" helm)
  if KUBECONFIG=$ROOT/.local-cluster/kubeconfig "$helm" status "$RELEASE" --namespace "$NS" >/dev/null 2>&1; then
    KUBECONFIG=$ROOT/.local-cluster/kubeconfig "$helm" uninstall "$RELEASE" --namespace "$NS" --wait --timeout 2m
  fi
  kubectl_ delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null
  log "release $RELEASE and namespace $NS removed; the CRDs and every job stay (docs/install.md, \"Uninstall\")"
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  *) echo "usage: $0 up [helm flags...]|down" >&2; exit 2 ;;
esac
