#!/usr/bin/env bash
# A real local Kubernetes control plane without Docker: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok (simulated nodes), all built
# from the Go module proxy and run as plain processes.
#
#   scripts/local-cluster.sh up       build on first use, start, wait until nodes are Ready
#   scripts/local-cluster.sh down     stop exactly what `up` started (saved PIDs); idempotent
#   scripts/local-cluster.sh status   what runs, and how often the supervisor restarted it
#   scripts/local-cluster.sh env      prints `export KUBECONFIG=...`
#   scripts/local-cluster.sh build    only build (or check the cache)
#   scripts/local-cluster.sh kill C       SIGKILL component C and keep it down (outage tests)
#   scripts/local-cluster.sh start C      start C again (after `kill`) and wait until it answers
#   scripts/local-cluster.sh restart C [S]  SIGKILL C, keep it down S seconds (default 0), start it
#   scripts/local-cluster.sh supervise    start the supervisor for a cluster `up` started without one
#
# `up` starts a supervisor: a component that dies (kube-scheduler exits on its own after
# API server restarts, "Scheduler cache is corrupted") is started again within seconds and
# the restart is logged in .local-cluster/logs/supervisor.log and counted by `status`.
#
# Binaries are cached under ~/.cache/airflow-t9k/k8s-<version>/bin and rebuilt only
# when the pinned version changes. State (PKI, logs, PIDs, etcd data) lives in
# .local-cluster/ in the checkout.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K8S_VERSION=v1.36.3
KWOK_VERSION=v0.8.0
ETCD_MODULE_VERSION=v3.6.13
GO_MIN=1.26
CACHE=${T9K_CLUSTER_CACHE:-$HOME/.cache/airflow-t9k}
BIN=$CACHE/k8s-$K8S_VERSION/bin
STATE=${T9K_CLUSTER_STATE:-$ROOT/.local-cluster}
PKI=$STATE/pki
KC=$STATE/kubeconfig
NODES=${T9K_CLUSTER_NODES:-2}

# Ports are unusual on purpose so a developer's own cluster is left alone.
P_ETCD=${T9K_PORT_ETCD:-32379}
P_ETCD_PEER=${T9K_PORT_ETCD_PEER:-32380}
P_ETCD_METRICS=${T9K_PORT_ETCD_METRICS:-32381}
P_API=${T9K_PORT_APISERVER:-36443}
P_KCM=${T9K_PORT_KCM:-30257}
P_SCHED=${T9K_PORT_SCHEDULER:-30259}
P_KWOK=${T9K_PORT_KWOK:-30247}  # kwok serves node endpoints (pod logs) and metrics here


COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

log() { echo "[local-cluster] $*" >&2; }
die() { log "error: $*"; exit 1; }

pid_of() { cat "$STATE/pids/$1" 2>/dev/null || true; }

pid_alive() {  # a zombie (exited, not yet reaped by the supervisor) counts as dead
  local p
  p=$(pid_of "$1")
  [[ -n $p ]] && kill -0 "$p" 2>/dev/null && [[ $(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$p/stat" 2>/dev/null) != Z ]]
}

save_pid() {  # name, pid: written whole, so a reader never sees an empty file
  echo "$2" >"$STATE/pids/$1.tmp" && mv -f "$STATE/pids/$1.tmp" "$STATE/pids/$1"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

check_go() {
  command -v go >/dev/null || die "Go is not installed; the local cluster is built from source (Go >= $GO_MIN). Install Go, or set T9K_TEST_KUBECONFIG / KUBECONFIG to use an existing cluster."
  local v
  v=$(go env GOVERSION | sed 's/^go//')
  if ! printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V -C; then
    die "Go $v is too old: building Kubernetes $K8S_VERSION and kwok $KWOK_VERSION needs Go >= $GO_MIN"
  fi
}

ldflags() {
  local minor d out="-s -w"
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  d=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    out+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$d"
  done
  echo "$out"
}

run_build() {  # name, log file, command...
  local name=$1 logf=$2; shift 2
  log "building $name (log: $logf)"
  if ! "$@" >"$logf" 2>&1; then
    log "build of $name failed; last lines of $logf:"
    tail -30 "$logf" >&2
    exit 1
  fi
}

built() {
  [[ "$("$BIN/kube-apiserver" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]] &&
    [[ -x $BIN/kube-controller-manager && -x $BIN/kube-scheduler && -x $BIN/kubectl ]] &&
    [[ -x $BIN/etcd && -f $BIN/etcd.version && "$(cat "$BIN/etcd.version")" == "$ETCD_MODULE_VERSION" ]] &&
    [[ -x $BIN/kwok && -f $BIN/kwok.version && "$(cat "$BIN/kwok.version")" == "$KWOK_VERSION" ]] &&
    [[ -f $BIN/kwok-stages.yaml ]]
}

build() {
  built && return 0
  check_go
  mkdir -p "$BIN" "$CACHE/logs"
  export GOTOOLCHAIN=local CGO_ENABLED=0
  local t0=$SECONDS
  if [[ "$("$BIN/kube-apiserver" --version 2>/dev/null)" != "Kubernetes $K8S_VERSION" ]]; then
    run_build "Kubernetes $K8S_VERSION" "$CACHE/logs/build-k8s.log" \
      bash -c "cd '$ROOT/tools/k8s' && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags '$(ldflags)' -o '$BIN/' \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl"
  fi
  if [[ ! -x $BIN/etcd || "$(cat "$BIN/etcd.version" 2>/dev/null)" != "$ETCD_MODULE_VERSION" ]]; then
    run_build "etcd $ETCD_MODULE_VERSION" "$CACHE/logs/build-etcd.log" \
      bash -c "cd '$ROOT/tools/etcd' && go build -trimpath -o '$BIN/etcd' go.etcd.io/etcd/server/v3"
    echo "$ETCD_MODULE_VERSION" >"$BIN/etcd.version"
  fi
  if [[ ! -x $BIN/kwok || "$(cat "$BIN/kwok.version" 2>/dev/null)" != "$KWOK_VERSION" ]]; then
    run_build "kwok $KWOK_VERSION" "$CACHE/logs/build-kwok.log" \
      bash -c "cd /tmp && GOBIN='$BIN' go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
    echo "$KWOK_VERSION" >"$BIN/kwok.version"
  fi
  # kwok's own node and pod stages ship in its module; copy them next to the binary
  # once so `up` never depends on the module cache.
  local kdir
  kdir=$(cd /tmp && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready pod/fast/pod-delete; do
    cat "$kdir/kustomize/stage/$f.yaml"
    echo '---'
  done >"$BIN/kwok-stages.yaml"
  log "build finished in $((SECONDS - t0))s; $(du -sh "$BIN" | cut -f1) in $BIN"
}

make_pki() {
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=airflow-t9k-local-ca \
      -keyout ca.key -out ca.crt -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout apiserver.key -out apiserver.csr 2>/dev/null
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local' \
      'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' 'basicConstraints=critical,CA:FALSE' \
      'authorityKeyIdentifier=keyid,issuer' >san.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile san.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    openssl rand -hex 24 >token
    echo "$(cat token),admin,admin,\"system:masters\"" >tokens.csv
    chmod 600 ./*.key token tokens.csv
  )
}

write_kubeconfig() {
  umask 077
  cat >"$KC" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: airflow-t9k-local
  cluster:
    server: https://127.0.0.1:$P_API
    certificate-authority: $PKI/ca.crt
users:
- name: admin
  user:
    token: $(cat "$PKI/token")
contexts:
- name: airflow-t9k-local
  context: {cluster: airflow-t9k-local, user: admin}
current-context: airflow-t9k-local
EOF
}

component_cmd() {  # name: prints nothing, sets CMD to the component's command line
  case $1 in
    etcd) CMD=("$BIN/etcd" --name=n0 --data-dir="$STATE/etcd" --unsafe-no-fsync
      --listen-client-urls="http://127.0.0.1:$P_ETCD" --advertise-client-urls="http://127.0.0.1:$P_ETCD"
      --listen-peer-urls="http://127.0.0.1:$P_ETCD_PEER" --initial-advertise-peer-urls="http://127.0.0.1:$P_ETCD_PEER"
      --initial-cluster="n0=http://127.0.0.1:$P_ETCD_PEER" --listen-metrics-urls="http://127.0.0.1:$P_ETCD_METRICS") ;;
    kube-apiserver) CMD=("$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$P_ETCD"
      --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$P_API" --endpoint-reconciler-type=none
      --cert-dir="$PKI" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key"
      --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" --authorization-mode=Node,RBAC
      --service-account-issuer=https://kubernetes.default.svc.cluster.local
      --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key"
      --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true
      --kubelet-preferred-address-types=InternalIP --kubelet-certificate-authority="$PKI/ca.crt"
      --enable-priority-and-fairness=false --max-requests-inflight=2000 --max-mutating-requests-inflight=1000) ;;
    kube-controller-manager) CMD=("$BIN/kube-controller-manager" --kubeconfig="$KC" --leader-elect=false
      --bind-address=127.0.0.1 --secure-port="$P_KCM" --controllers='*' --use-service-account-credentials=false
      --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt"
      --kube-api-qps=200 --kube-api-burst=400) ;;
    kube-scheduler) CMD=("$BIN/kube-scheduler" --kubeconfig="$KC" --leader-elect=false
      --bind-address=127.0.0.1 --secure-port="$P_SCHED" --kube-api-qps=200 --kube-api-burst=400) ;;
    kwok) CMD=("$BIN/kwok" --kubeconfig="$KC" --config="$STATE/kwok-stages.yaml" --manage-all-nodes=true
      --node-lease-duration-seconds=40 --cidr=10.244.0.0/16 --node-ip=127.0.0.1 --node-port="$P_KWOK"
      --server-address="127.0.0.1:$P_KWOK"
      --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key") ;;
    *) die "unknown component '$1' (one of: ${COMPONENTS[*]})" ;;
  esac
}

start() {  # name: launch the component in the background, appending to its log
  local n=$1 CMD
  component_cmd "$n"
  nohup "${CMD[@]}" >>"$STATE/logs/$n.log" 2>&1 </dev/null &
  save_pid "$n" $!
}

answers() {  # name: the component is up and answering
  case $1 in
    etcd) curl -fs "http://127.0.0.1:$P_ETCD/health" ;;
    kube-apiserver) curl -fs --cacert "$PKI/ca.crt" "https://127.0.0.1:$P_API/readyz" ;;
    kube-controller-manager) curl -fsk "https://127.0.0.1:$P_KCM/healthz" ;;
    kube-scheduler) curl -fsk "https://127.0.0.1:$P_SCHED/healthz" ;;
    kwok) pid_alive kwok ;;
  esac
}

wait_for() {  # name, seconds, check command...
  local n=$1 limit=$2; shift 2
  local deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if ! pid_alive "$n"; then
      log "$n exited while starting; last lines of $STATE/logs/$n.log:"
      tail -40 "$STATE/logs/$n.log" >&2
      exit 1
    fi
    sleep 0.25
  done
  log "$n did not become ready within ${limit}s; last lines of $STATE/logs/$n.log:"
  tail -40 "$STATE/logs/$n.log" >&2
  exit 1
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$KC" "$@"; }

node_manifest() {
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$1
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  # host-arch / accelerator-type and the Ascend NPUs let MindCluster's AscendJob example (seed 002) schedule.
  labels: {kubernetes.io/hostname: kwok-node-$1, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok,
           host-arch: huawei-arm, accelerator-type: card-910b-2}
status:
  capacity: {cpu: "64", memory: 512Gi, pods: "500", nvidia.com/gpu: "8", huawei.com/Ascend910: "8"}
  allocatable: {cpu: "64", memory: 512Gi, pods: "500", nvidia.com/gpu: "8", huawei.com/Ascend910: "8"}
EOF
}

up() {
  if pid_alive kube-apiserver; then
    log "already running; 'down' first to restart"
    return 0
  fi
  down_quiet
  build
  local t0=$SECONDS
  for p in "$P_ETCD" "$P_ETCD_PEER" "$P_ETCD_METRICS" "$P_API" "$P_KCM" "$P_SCHED" "$P_KWOK"; do
    port_in_use "$p" && die "port $p is in use by another process; stop it or set the T9K_PORT_* variables (see scripts/local-cluster.sh)"
  done
  rm -rf "$STATE"
  mkdir -p "$STATE"/{logs,pids,etcd}
  make_pki
  write_kubeconfig
  # Every pod's log is this one CRI-format file: tests and demos append lines to it.
  mkdir -p "$STATE/pod-logs"
  printf '%s stdout F %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.000000000Z)" "container started (simulated by kwok)" >"$STATE/pod-logs/all.log"
  {
    cat "$BIN/kwok-stages.yaml" "$ROOT/scripts/kwok/sim-stages.yaml"
    printf -- '---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterLogs\nmetadata: {name: all-pods}\nspec:\n  selector: {}\n  logs:\n  - logsFile: %s\n    follow: true\n' "$STATE/pod-logs/all.log"
  } >"$STATE/kwok-stages.yaml"

  start etcd
  wait_for etcd 30 curl -fs "http://127.0.0.1:$P_ETCD/health"

  start kube-apiserver
  wait_for kube-apiserver 90 curl -fs --cacert "$PKI/ca.crt" "https://127.0.0.1:$P_API/readyz"

  start kube-controller-manager
  start kube-scheduler
  start kwok

  local i
  for ((i = 0; i < NODES; i++)); do node_manifest "$i"; echo '---'; done | kubectl_ apply -f - >/dev/null
  wait_for kube-controller-manager 60 kubectl_ -n default get serviceaccount default
  wait_for kube-scheduler 60 curl -fsk "https://127.0.0.1:$P_SCHED/healthz"
  wait_for kwok 90 bash -c "[[ \$('$BIN/kubectl' --kubeconfig '$KC' get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' | grep -c True) -ge $NODES ]]"
  # The not-ready taint is removed by KCM's node-lifecycle controller a moment later.
  wait_for kube-controller-manager 60 bash -c "! '$BIN/kubectl' --kubeconfig '$KC' get nodes -o jsonpath='{.items[*].spec.taints}' | grep -q not-ready"
  start_supervisor
  log "ready in $((SECONDS - t0))s: $NODES kwok nodes; export KUBECONFIG=$KC"
}

# -- supervision ------------------------------------------------------------------------------
# One loop for every component: what died is started again, unless `kill` holds it down.
supervise_loop() {
  set +e
  save_pid supervisor $$
  mkdir -p "$STATE/restarts" "$STATE/held"
  log "supervising ${COMPONENTS[*]} (pid $$)"
  local n count
  while [[ "$(pid_of supervisor)" == "$$" ]]; do
    for n in "${COMPONENTS[@]}"; do
      [[ -f $STATE/held/$n ]] && continue
      pid_alive "$n" && continue
      [[ -f $STATE/pids/$n ]] || continue  # never started here (or `down` is under way)
      count=$(($(cat "$STATE/restarts/$n" 2>/dev/null || echo 0) + 1))
      echo "$count" >"$STATE/restarts/$n"
      log "$(date -u +%H:%M:%S) $n (pid $(pid_of "$n")) is not running; starting it again (restart $count); last lines of its log:"
      tail -5 "$STATE/logs/$n.log" >&2
      start "$n"
    done
    sleep 1
  done
  log "supervisor $$ stopping"
}

start_supervisor() {
  if pid_alive supervisor; then return 0; fi
  mkdir -p "$STATE/logs" "$STATE/pids"
  rm -f "$STATE/pids/supervisor"
  # Its own session: a test run interrupted with Ctrl-C does not take the supervisor along.
  setsid nohup "$ROOT/scripts/local-cluster.sh" _supervise >>"$STATE/logs/supervisor.log" 2>&1 </dev/null &
  local _
  for _ in $(seq 40); do pid_alive supervisor && return 0; sleep 0.1; done
  die "the supervisor did not start; see $STATE/logs/supervisor.log"
}

require_cluster() {
  [[ -f $STATE/pids/kube-apiserver ]] || die "the local cluster is not up ('$0 up' first)"
}

kill_component() {  # name: SIGKILL, and hold it down until `start`
  local n=$1 pid CMD
  component_cmd "$n"
  require_cluster
  mkdir -p "$STATE/held"
  touch "$STATE/held/$n"
  pid=$(pid_of "$n")
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 40); do pid_alive "$n" || break; sleep 0.05; done
    log "killed $n (pid $pid); it stays down until '$0 start $n'"
  fi
}

start_component() {  # name: start it if it is not running, and wait until it answers
  local n=$1 CMD
  component_cmd "$n"
  require_cluster
  if ! pid_alive "$n"; then
    start "$n"
    log "started $n (pid $(pid_of "$n"))"
  fi
  rm -f "$STATE/held/$n"  # only now: the supervisor must not start a second one meanwhile
  wait_for "$n" 90 answers "$n"
}

down_quiet() {
  local n pid stopped=()
  [[ -d $STATE/pids ]] || return 0
  # The supervisor first, or it would start what is being stopped.
  pid=$(pid_of supervisor)
  rm -f "$STATE/pids/supervisor"
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    stopped+=("supervisor:$pid")
  fi
  for n in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    [[ -f $STATE/pids/$n ]] || continue
    pid=$(cat "$STATE/pids/$n")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      stopped+=("$n:$pid")
    fi
    rm -f "$STATE/pids/$n"
  done
  for entry in "${stopped[@]}"; do
    pid=${entry#*:}
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  done
  ((${#stopped[@]})) && log "stopped ${stopped[*]}"
  return 0
}

status() {
  local n any=0 restarts
  for n in "${COMPONENTS[@]}"; do
    restarts=$(cat "$STATE/restarts/$n" 2>/dev/null || echo 0)
    restarts=$( ((restarts)) && echo ", restarted $restarts time(s) by the supervisor" || true)
    if pid_alive "$n"; then
      echo "$n: running (pid $(pid_of "$n")$restarts)"
      any=1
    elif [[ -f $STATE/held/$n ]]; then
      echo "$n: stopped by '$0 kill' (start it with '$0 start $n')"
    else
      echo "$n: stopped$restarts"
    fi
  done
  if pid_alive supervisor; then
    echo "supervisor: running (pid $(pid_of supervisor)); components that die are started again"
  elif ((any)); then
    echo "supervisor: not running; components that die stay down ('$0 supervise' starts it)"
  fi
  if ((any)) && [[ -f $KC ]]; then kubectl_ get nodes 2>/dev/null || true; fi
  ((any))
}

case ${1:-} in
  up) up ;;
  down) down_quiet ;;
  status) status ;;
  env) echo "export KUBECONFIG=$KC" ;;
  build) build ;;
  bin) echo "$BIN" ;;
  kill) kill_component "${2:?component}" ;;
  start) start_component "${2:?component}" ;;
  restart)
    kill_component "${2:?component}"
    sleep "${3:-0}"
    start_component "$2"
    ;;
  supervise) require_cluster; start_supervisor; log "supervisor running (pid $(pid_of supervisor))" ;;
  _supervise) supervise_loop ;;
  *) echo "usage: $0 up|down|status|env|build|bin|kill C|start C|restart C [seconds]|supervise" >&2; exit 2 ;;
esac
