#!/usr/bin/env bash
# Kubeflow's training operator (v1.8.1, PyTorchJob only) on the local cluster, for
# benchmarks/vs_kubeflow.py. Not part of the tests or CI.
#
#   benchmarks/kubeflow/kubeflow.sh build     build into ~/.cache/airflow-t9k/kubeflow-<version>/bin (niced)
#   benchmarks/kubeflow/kubeflow.sh install   CRDs, the cert Secret and the validating webhook (idempotent)
#   benchmarks/kubeflow/kubeflow.sh start [operator flags...]   start it, wait until /readyz answers
#   benchmarks/kubeflow/kubeflow.sh stop | status | log | uninstall
#
# The binary is our own small main (cmd/training-operator-bench) around the operator's manager,
# in this directory's Go module (it pins k8s.io/* v0.29, apart from tools/k8s). Upstream's main
# has no flag for the client's QPS/burst and writes certificates to a fixed /tmp path; ours takes
# --kube-api-qps/--kube-api-burst (default: upstream's 20/30) and --cert-dir. Flags after `start`
# go to the operator, e.g. `start --kube-api-qps=-1 --controller-threads=4`.
#
# Certificates: the operator's cert rotator (open-policy-agent/cert-controller) cannot be turned
# off. It needs its Secret to exist (install creates it empty), fills it with a CA and a serving
# pair for DNS name "localhost", injects the CA into the ValidatingWebhookConfiguration
# validator.training-operator.kubeflow.org, and waits for the pair on disk; our main copies the
# Secret into --cert-dir as a kubelet's volume mount would. The webhook configuration uses a URL
# (https://localhost:PORT/...) because the local cluster has no Service routing. While the
# operator is stopped, PyTorchJob creates are refused (failurePolicy Fail, as upstream ships it).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VERSION=v1.8.1
CACHE=${T9K_CLUSTER_CACHE:-$HOME/.cache/airflow-t9k}
KF_BIN=$CACHE/kubeflow-$VERSION/bin
K8S_BIN=$CACHE/k8s-v1.36.3/bin
STATE=${T9K_CLUSTER_STATE:-$ROOT/.local-cluster}/kubeflow
KC=${KUBECONFIG:-${T9K_CLUSTER_STATE:-$ROOT/.local-cluster}/kubeconfig}
P_WEBHOOK=${T9K_PORT_KUBEFLOW_WEBHOOK:-39444}
P_HEALTH=${T9K_PORT_KUBEFLOW_HEALTH:-38082}
P_METRICS=${T9K_PORT_KUBEFLOW_METRICS:-38444}
NS=kubeflow
SECRET=training-operator-webhook-cert

NAME=kubeflow
BIN=$KF_BIN/training-operator-bench
# shellcheck source=../_gobench.sh
source "$HERE/../_gobench.sh"
kubectl_() { "$K8S_BIN/kubectl" --kubeconfig "$KC" "$@"; }

install() {
  [[ -f $KC ]] || die "no kubeconfig at $KC; is the local cluster up (scripts/local-cluster.sh up)?"
  # kubectl's own kustomize: a plain -f on the directory trips over kustomization.yaml.
  kubectl_ apply --server-side --force-conflicts -k "$(module_dir github.com/kubeflow/training-operator)/manifests/base/crds/" >/dev/null
  kubectl_ wait --for condition=Established --timeout=60s crd/pytorchjobs.kubeflow.org >/dev/null
  kubectl_ create namespace "$NS" --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
  kubectl_ -n "$NS" get secret "$SECRET" >/dev/null 2>&1 || kubectl_ -n "$NS" create secret generic "$SECRET" >/dev/null
  # Only the PyTorchJob entry: the operator serves no other validation path here. The rotator
  # adds caBundle; server-side apply with our field manager leaves the rotator's field alone.
  kubectl_ apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validator.training-operator.kubeflow.org
webhooks:
- name: validator.pytorchjob.training-operator.kubeflow.org
  admissionReviewVersions: [v1]
  clientConfig:
    url: https://localhost:$P_WEBHOOK/validate-kubeflow-org-v1-pytorchjob
  failurePolicy: Fail
  sideEffects: None
  rules:
  - apiGroups: [kubeflow.org]
    apiVersions: [v1]
    operations: [CREATE, UPDATE]
    resources: [pytorchjobs]
YAML
  log "installed: kubeflow.org CRDs, Secret $NS/$SECRET, webhook on localhost:$P_WEBHOOK"
}

uninstall() {
  stop
  kubectl_ delete validatingwebhookconfiguration validator.training-operator.kubeflow.org --ignore-not-found >/dev/null
  kubectl_ delete -k "$(module_dir github.com/kubeflow/training-operator)/manifests/base/crds/" --ignore-not-found >/dev/null
  kubectl_ delete namespace "$NS" --ignore-not-found --wait=false >/dev/null
  log "uninstalled"
}

start() {
  alive && { log "already running (pid $(pid))"; return 0; }
  built || die "not built; run: $0 build"
  kubectl_ get crd pytorchjobs.kubeflow.org >/dev/null 2>&1 || install
  for p in "$P_WEBHOOK" "$P_HEALTH" "$P_METRICS"; do
    port_in_use "$p" && die "port $p is in use; stop its owner or set T9K_PORT_KUBEFLOW_*"
  done
  mkdir -p "$STATE"
  rm -rf "$STATE/certs"
  MY_POD_NAMESPACE=$NS "$BIN" --kubeconfig "$KC" --cert-dir "$STATE/certs" \
    --secret-namespace "$NS" --webhook-secret-name "$SECRET" --webhook-server-port "$P_WEBHOOK" \
    --health-probe-bind-address "127.0.0.1:$P_HEALTH" --metrics-bind-address "127.0.0.1:$P_METRICS" \
    "$@" >"$STATE/operator.log" 2>&1 </dev/null &
  echo $! >"$STATE/pid"
  wait_ready "$STATE/operator.log" ready
}

# /readyz answers once the webhook server runs; the controller's workers (and the webhook's
# path) come a moment later, and a PyTorchJob created before that would be refused.
ready() { curl -fs "http://127.0.0.1:$P_HEALTH/readyz" >/dev/null 2>&1 && grep -q 'Starting workers' "$STATE/operator.log"; }

case ${1:-} in
  build) build "training-operator $VERSION" ;;
  install) install ;;
  uninstall) uninstall ;;
  start) shift; start "$@" ;;
  stop) stop ;;
  status) status ;;
  log) cat "$STATE/operator.log" ;;
  pid) pid ;;
  *) sed -n '2,9p' "$0" >&2; exit 2 ;;
esac
