#!/usr/bin/env bash
# A real local Kubernetes control plane without Docker: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok (simulated nodes), all built
# from the Go module proxy and run as plain processes.
#
#   scripts/local-cluster.sh up       build on first use, start, wait until nodes are Ready
#   scripts/local-cluster.sh up --real-node   also a node that runs real containers (T9K_REAL_NODE=1)
#   scripts/local-cluster.sh down     stop exactly what `up` started (saved PIDs); idempotent
#   scripts/local-cluster.sh status   what runs, and how often the supervisor restarted it
#   scripts/local-cluster.sh env      prints `export KUBECONFIG=...`
#   scripts/local-cluster.sh build    only build (or check the cache)
#   scripts/local-cluster.sh kill C       SIGKILL component C and keep it down (outage tests)
#   scripts/local-cluster.sh start C      start C again (after `kill`) and wait until it answers
#   scripts/local-cluster.sh restart C [S]  SIGKILL C, keep it down S seconds (default 0), start it
#   scripts/local-cluster.sh supervise    start the supervisor for a cluster `up` started without one
#   scripts/local-cluster.sh kueue up|down|status|log   Kueue on the running cluster (see below)
#   scripts/local-cluster.sh real-node build|images      build the real node's parts; import rebuilt images
#   scripts/local-cluster.sh real-node train-image       build only the replicas' image (part of build)
#   scripts/local-cluster.sh real-node import TAR        import an image archive into the real node's containerd
#   scripts/local-cluster.sh real-node host-state        the host settings the node changes (`down` must restore them)
#   scripts/local-cluster.sh helm            build Helm on first use (tools/helm); print its path
#   scripts/local-cluster.sh prefetch        download the Go modules of every build not done yet (.ci/run, in the background)
#   scripts/local-cluster.sh image build|import|ref NAME   an image of this package (scripts/images/NAME.conf):
#                                           build it (cached by content), import it into the real node, or print its ref
#
# Kueue (opt-in: `up --with-kueue` or T9K_WITH_KUEUE=1, or `kueue up` on a running cluster):
# its manager is built from the Go module proxy (tools/kueue, a module of its own) into
# ~/.cache/airflow-t9k/kueue-<version>/bin and runs as a plain process next to the control
# plane. Its CRDs and its kueue.x-k8s.io webhooks are installed with URL client configs on
# 127.0.0.1, served with a certificate from this script's CA; a ResourceFlavor `default` and
# a ClusterQueue `cluster-queue` with quota for the kwok nodes' cpu, memory, nvidia.com/gpu
# and huawei.com/Ascend910 are created. LocalQueues are the users' (and the tests') to make.
# `kueue down` stops the manager only: CRDs and webhooks stay, so Workload writes fail while
# it is down, as on a real cluster whose Kueue is unavailable. `down` stops it too.
#
# `up` starts a supervisor: a component that dies (kube-scheduler exits on its own after
# API server restarts, "Scheduler cache is corrupted") is started again within seconds and
# the restart is logged in .local-cluster/logs/supervisor.log and counted by `status`.
#
# The real node (`up --real-node` or T9K_REAL_NODE=1; scripts/realnode/node.sh, docs/real-node.md):
# kubelet, containerd, kube-proxy and CoreDNS beside the control plane, one node `real-node-0`
# labelled and tainted t9k.test/real=true, images built from Debian packages. kwok manages only the
# nodes annotated kwok.x-k8s.io/node=fake, never the real one. With it the API server listens on
# the node's bridge address (10.88.0.1, which the host reaches too) instead of 127.0.0.1, and is
# the `kubernetes` Service's endpoint, so pods reach it at its cluster IP as in a real cluster.
#
# Helm (`helm`; the chart in deploy/chart, `make deploy-local`) is built from the Go module proxy
# (tools/helm, a module of its own) into ~/.cache/airflow-t9k/helm-<version>/bin.
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
P_KUEUE_WEBHOOK=${T9K_PORT_KUEUE_WEBHOOK:-39443}  # the API server calls Kueue's webhooks here
P_KUEUE_HEALTH=${T9K_PORT_KUEUE_HEALTH:-38081}
P_KUEUE_METRICS=${T9K_PORT_KUEUE_METRICS:-38443}
KUEUE_VERSION=v0.17.0
KUEUE_BIN=$CACHE/kueue-$KUEUE_VERSION/bin
KUEUE_STATE=$STATE/kueue
HELM_VERSION=$(sed -n 's|^[[:space:]]*helm.sh/helm/v4 \(v[0-9.]*\).*|\1|p' "$ROOT/tools/helm/go.mod" | head -1)
HELM_BIN=$CACHE/helm-$HELM_VERSION/bin
IMAGES=$CACHE/images  # images of this package (scripts/images), by name and content id


COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
# shellcheck source=realnode/node.sh
source "$ROOT/scripts/realnode/node.sh"
rn_enabled && COMPONENTS+=("${RN_COMPONENTS[@]}")
real_node_wanted() { [[ ${T9K_REAL_NODE:-0} == 1 ]]; }

log() { echo "[local-cluster] $*" >&2; }
die() { log "error: $*"; exit 1; }

# Builtins only (no cat, sed or subshell): the supervisor asks about every component every
# second, and forking for it cost 0.034 CPU-seconds a second, some 70 in a `make test`.
pid_of() {
  local p=
  [[ -r $STATE/pids/$1 ]] && read -r p <"$STATE/pids/$1" || true  # an empty file reads as no pid
  echo "$p"
}

pid_alive() {  # a zombie (exited, not yet reaped by the supervisor) counts as dead
  local p= stat=
  [[ -r $STATE/pids/$1 ]] && read -r p <"$STATE/pids/$1" || true
  [[ -n $p ]] && kill -0 "$p" 2>/dev/null || return 1
  read -r stat <"/proc/$p/stat" 2>/dev/null || return 1
  stat=${stat##*) }  # past "pid (comm) ": the state letter
  [[ ${stat:0:1} != Z ]]
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

KWOK_PATCHES=("$ROOT"/tools/kwok/*.patch)  # applied in this (name) order
kwok_build_id() {  # the version plus the patches' digest: a changed patch rebuilds kwok
  echo "$KWOK_VERSION+$(cat "${KWOK_PATCHES[@]}" | sha256sum | cut -c1-12)"
}
# One binary per build id: checkouts whose patches differ (branches) each keep theirs, instead
# of rebuilding over each other's on every `up`.
KWOK=$BIN/kwok-$(kwok_build_id)

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
    [[ -x $KWOK ]] &&
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
  # kwok's source comes from the module proxy; its stages ship in the same module.
  local kdir
  kdir=$(cd /tmp && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  if [[ ! -x $KWOK ]]; then
    # Built with tools/kwok/*.patch:
    # - uid-preconditions.patch: kwok deletes and patches a pod by name, so a stage planned for
    #   a deleted pod hit its successor of the same name (a restarted replica) and showed up as a
    #   replica run twice. The kubelet uses the pod's UID as a precondition (kubernetes#25224);
    #   the patched kwok does too.
    # - namespace-logs.patch: a namespace's pods get their log from pod-logs/<namespace>/all.log
    #   when it exists (the tests' namespaces, so tests running side by side each print into
    #   their own), from the shared pod-logs/all.log otherwise.
    local src=$CACHE/kwok-src p
    rm -rf "$src" && cp -r "$kdir" "$src" && chmod -R u+w "$src"
    for p in "${KWOK_PATCHES[@]}"; do
      GIT_CEILING_DIRECTORIES=$(dirname "$src") git -C "$src" apply "$p" || die "tools/kwok/$(basename "$p") does not apply to kwok $KWOK_VERSION"
    done
    run_build "kwok $KWOK_VERSION (tools/kwok/*.patch)" "$CACHE/logs/build-kwok.log" \
      bash -c "cd '$src' && GOWORK=off go build -trimpath -o '$KWOK.tmp' ./cmd/kwok && mv -f '$KWOK.tmp' '$KWOK'"
    rm -rf "$src"
  fi
  # kwok's own node and pod stages: copied next to the binary once, so `up` never depends
  # on the module cache.
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
    printf '%s\n' "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,IP:$RN_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' 'basicConstraints=critical,CA:FALSE' \
      'authorityKeyIdentifier=keyid,issuer' >san.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile san.ext -out apiserver.crt 2>/dev/null
    # The API server's identity towards kubelets (logs, exec): bound to system:kubelet-api-admin
    # where a real node runs (scripts/realnode/node.sh), worthless elsewhere.
    openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver-kubelet-client -keyout apiserver-kubelet-client.key \
      -out apiserver-kubelet-client.csr 2>/dev/null
    printf '%s\n' 'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=clientAuth' \
      'basicConstraints=critical,CA:FALSE' >client.ext
    openssl x509 -req -in apiserver-kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile client.ext -out apiserver-kubelet-client.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    openssl rand -hex 24 >token
    echo "$(cat token),admin,admin,\"system:masters\"" >tokens.csv
    chmod 600 ./*.key token tokens.csv
  )
}

write_kubeconfig() {
  # Only this file is private: a umask set here for the rest of `up` reached every component, and
  # containerd then unpacked images into 0700 snapshot roots that no non-root container could read.
  local old_umask
  old_umask=$(umask)
  umask 077
  cat >"$KC" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: airflow-t9k-local
  cluster:
    server: https://$(api_address):$P_API
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
  umask "$old_umask"
}

# The API server's address: loopback, or with the real node the node's bridge address, where its
# pods reach it through the `kubernetes` Service (the lease reconciler keeps that Service's
# endpoints on it, as in a real cluster). The bridge exists before the API server starts (rn_prepare).
api_address() { if rn_enabled; then echo "$RN_IP"; else echo 127.0.0.1; fi; }
# Kubernetes 1.36 features the controller uses where the cluster has them (docs/disruptions.md,
# docs/queueing.md): in-place restarts (container restart rules, KEP-5307, and RestartAllContainers,
# KEP-5532: beta and on by default in 1.36, named so the cluster says what it relies on; the
# scheduler places such pods on nodes that declare the feature, KEP-5328) and gang scheduling
# without add-ons (the Workload API's PodGroups, KEP-4671: alpha, off by default).
FEATURE_GATES=${T9K_FEATURE_GATES:-ContainerRestartRules=true,RestartAllContainersOnContainerExits=true,NodeDeclaredFeatures=true,GenericWorkload=true,GangScheduling=true}

component_cmd() {  # name: prints nothing, sets CMD to the component's command line
  local api_addr reconciler=none
  api_addr=$(api_address)
  [[ $api_addr == 127.0.0.1 ]] || reconciler=lease
  case $1 in
    etcd) CMD=("$BIN/etcd" --name=n0 --data-dir="$STATE/etcd" --unsafe-no-fsync
      --listen-client-urls="http://127.0.0.1:$P_ETCD" --advertise-client-urls="http://127.0.0.1:$P_ETCD"
      --listen-peer-urls="http://127.0.0.1:$P_ETCD_PEER" --initial-advertise-peer-urls="http://127.0.0.1:$P_ETCD_PEER"
      --initial-cluster="n0=http://127.0.0.1:$P_ETCD_PEER" --listen-metrics-urls="http://127.0.0.1:$P_ETCD_METRICS") ;;
    kube-apiserver) CMD=("$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$P_ETCD"
      --bind-address="$api_addr" --advertise-address="$api_addr" --secure-port="$P_API" --endpoint-reconciler-type="$reconciler"
      --cert-dir="$PKI" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key"
      --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" --authorization-mode=Node,RBAC
      --service-account-issuer=https://kubernetes.default.svc.cluster.local
      --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key"
      --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true
      --kubelet-preferred-address-types=InternalIP --kubelet-certificate-authority="$PKI/ca.crt"
      --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key"
      --enable-priority-and-fairness=false --max-requests-inflight=2000 --max-mutating-requests-inflight=1000
      --feature-gates="$FEATURE_GATES" --runtime-config=scheduling.k8s.io/v1alpha2=true) ;;
    kube-controller-manager) CMD=("$BIN/kube-controller-manager" --kubeconfig="$KC" --leader-elect=false
      --bind-address=127.0.0.1 --secure-port="$P_KCM" --controllers='*' --use-service-account-credentials=false
      --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt"
      --kube-api-qps=200 --kube-api-burst=400 --feature-gates="$FEATURE_GATES"
      # Its /metrics and /debug/pprof for the benchmarks, to the admin's token, as the scheduler's.
      --authentication-kubeconfig="$KC" --authorization-kubeconfig="$KC"
      --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key") ;;
    kube-scheduler) CMD=("$BIN/kube-scheduler" --kubeconfig="$KC" --leader-elect=false
      --bind-address=127.0.0.1 --secure-port="$P_SCHED" --kube-api-qps=200 --kube-api-burst=400
      --feature-gates="$FEATURE_GATES"
      # Its /metrics for the benchmarks (gang cycles, attempts by result), to the admin's token,
      # as kubeadm wires it: tokens checked and authorized by the API server.
      --authentication-kubeconfig="$KC" --authorization-kubeconfig="$KC"
      --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key") ;;
    # Only the fake nodes (annotated by node_manifest): on a real node kwok would fake the
    # kubelet's status and lease and patch real pods Running with made-up addresses.
    kwok) CMD=("$KWOK" --kubeconfig="$KC" --config="$STATE/kwok-stages.yaml"
      --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
      --node-lease-duration-seconds=40 --cidr=10.244.0.0/16 --node-ip=127.0.0.1 --node-port="$P_KWOK"
      --server-address="127.0.0.1:$P_KWOK"
      --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key") ;;
    *) rn_component_cmd "$1" || die "unknown component '$1' (one of: ${COMPONENTS[*]})" ;;
  esac
}

start() {  # name: launch the component in the background, appending to its log
  local n=$1 CMD
  component_cmd "$n"
  # A usual umask whatever the caller's: containerd and the kubelet create what containers read
  # (image snapshots, volumes) with it. `exec` keeps the saved PID the component's.
  # Go's collector less often: a fifth of the API server's CPU went to it (go_cpu_classes_gc_*)
  # with the default GOGC=100; the heap may grow to 4x what is live, never past GOMEMLIMIT.
  (umask 022 && GOGC=${GOGC:-400} GOMEMLIMIT=${GOMEMLIMIT:-3GiB} exec nohup "${CMD[@]}" >>"$STATE/logs/$n.log" 2>&1 </dev/null) &
  save_pid "$n" $!
}

answers() {  # name: the component is up and answering
  case $1 in
    etcd) curl -fs "http://127.0.0.1:$P_ETCD/health" ;;
    kube-apiserver) curl -fs --cacert "$PKI/ca.crt" "https://$(api_address):$P_API/readyz" ;;
    kube-controller-manager) curl -fsk "https://127.0.0.1:$P_KCM/healthz" ;;
    kube-scheduler) curl -fsk "https://127.0.0.1:$P_SCHED/healthz" ;;
    kwok) pid_alive kwok ;;
    *) rn_answers "$1" ;;
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

# The fixed ports above lie in the kernel's ephemeral range (32768-60999 by default). While the
# cluster runs they are reserved (net.ipv4.ip_local_reserved_ports, as root), so that no outgoing
# connection and no bind to port 0 (a test's free port) takes one while its component is down: a
# test's free port once was the API server's, which listens on one address only, and an API
# server or Kueue started again after an outage test could find its port taken. Restored by down.
RESERVED=/proc/sys/net/ipv4/ip_local_reserved_ports
reserve_ports() {
  [[ -w $RESERVED ]] || return 0
  local before ours
  before=$(cat "$RESERVED")
  ours="$P_ETCD,$P_ETCD_PEER,$P_ETCD_METRICS,$P_API,$P_KCM,$P_SCHED,$P_KWOK,$P_KUEUE_WEBHOOK,$P_KUEUE_HEALTH,$P_KUEUE_METRICS"
  printf '%s\n' "$before" >"$STATE/reserved_ports.before"
  echo "${before:+$before,}$ours" >"$RESERVED"
}
release_ports() {
  [[ -f $STATE/reserved_ports.before && -w $RESERVED ]] || return 0
  cat "$STATE/reserved_ports.before" >"$RESERVED"
  rm -f "$STATE/reserved_ports.before"
}

up() {
  if pid_alive kube-apiserver; then
    log "already running; 'down' first to restart"
    return 0
  fi
  down_quiet
  build
  real_node_wanted && rn_build  # before anything starts: a failed build leaves nothing running
  local t0=$SECONDS
  for p in "$P_ETCD" "$P_ETCD_PEER" "$P_ETCD_METRICS" "$P_API" "$P_KCM" "$P_SCHED" "$P_KWOK"; do
    port_in_use "$p" && die "port $p is in use by another process; stop it or set the T9K_PORT_* variables (see scripts/local-cluster.sh)"
  done
  rm -rf "$STATE"
  mkdir -p "$STATE"/{logs,pids,etcd}
  reserve_ports
  real_node_wanted && rn_prepare  # the bridge first: the API server listens on its address
  make_pki
  write_kubeconfig
  # Every pod's log is this one CRI-format file: tests and demos append lines to it. A namespace's
  # own pod-logs/<namespace>/all.log, where one exists, is its pods' log instead (namespace-logs.patch).
  mkdir -p "$STATE/pod-logs"
  printf '%s stdout F %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.000000000Z)" "container started (simulated by kwok)" >"$STATE/pod-logs/all.log"
  {
    cat "$BIN/kwok-stages.yaml" "$ROOT/scripts/kwok/sim-stages.yaml"
    printf -- '---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterLogs\nmetadata: {name: all-pods}\nspec:\n  selector: {}\n  logs:\n  - logsFile: %s\n    follow: true\n' "$STATE/pod-logs/all.log"
    # kwok moves at most 4 pods through their stages at once (its default), so the fake nodes'
    # pods turn Running at ~45 a second here whichever controller made them, where real
    # kubelets work side by side. The benchmarks may raise it (docs/benchmarks.md); tests keep it.
    # A KwokConfiguration given here replaces kwok's defaulted one: the other workers' counts
    # are kwok's defaults, written out (a zero is refused). Its serverAddress too: without it kwok
    # served no pod logs (405), and the log streams the controller follows failed (docs/benchmarks.md).
    if [[ -n ${T9K_KWOK_POD_PARALLELISM:-} ]]; then
      printf -- '---\napiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n  podPlayStageParallelism: %d\n  nodePlayStageParallelism: 4\n  nodeLeaseParallelism: 4\n  podsOnNodeSyncParallelism: 1\n  enableDebuggingHandlers: true\n  serverAddress: "127.0.0.1:%s"\n' "$T9K_KWOK_POD_PARALLELISM" "$P_KWOK"
    fi
  } >"$STATE/kwok-stages.yaml"

  start etcd
  wait_for etcd 30 curl -fs "http://127.0.0.1:$P_ETCD/health"

  start kube-apiserver
  wait_for kube-apiserver 90 curl -fs --cacert "$PKI/ca.crt" "https://$(api_address):$P_API/readyz"

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
  real_node_wanted && rn_up
  start_supervisor
  log "ready in $((SECONDS - t0))s: $NODES kwok nodes$(real_node_wanted && echo " and real node $RN_NAME"); export KUBECONFIG=$KC"
}

# -- supervision ------------------------------------------------------------------------------
# One loop for every component: what died is started again, unless `kill` holds it down.
supervise_loop() {
  set +e
  save_pid supervisor $$
  mkdir -p "$STATE/restarts" "$STATE/held"
  log "supervising ${COMPONENTS[*]} (pid $$)"
  local n count me= tick
  exec {tick}<> <(:)  # `read -t 1` on it is a sleep without a process a second
  while { read -r me <"$STATE/pids/supervisor"; } 2>/dev/null && [[ $me == "$$" ]]; do
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
    read -rt 1 -u "$tick" || true
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
  rn_down  # its pods go while the API server and the kubelet still run
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
  release_ports
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

# -- Kueue (opt-in) ---------------------------------------------------------------------------
kueue_built() { [[ -x $KUEUE_BIN/kueue && "$(cat "$KUEUE_BIN/kueue.version" 2>/dev/null)" == "$KUEUE_VERSION" ]]; }

kueue_build() {
  kueue_built && return 0
  check_go
  mkdir -p "$KUEUE_BIN" "$CACHE/logs"
  local t0=$SECONDS
  # Niced: minutes of both cores on a machine others use too.
  run_build "Kueue $KUEUE_VERSION" "$CACHE/logs/build-kueue.log" \
    bash -c "cd '$ROOT/tools/kueue' && GOTOOLCHAIN=local CGO_ENABLED=0 nice -n 10 go build -trimpath \
      -ldflags '-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION -X sigs.k8s.io/kueue/pkg/version.GitCommit=module-proxy' \
      -o '$KUEUE_BIN/kueue' sigs.k8s.io/kueue/cmd/kueue"
  echo "$KUEUE_VERSION" >"$KUEUE_BIN/kueue.version"
  log "Kueue built in $((SECONDS - t0))s"
}

kueue_python() {  # PyYAML is needed to render the manifests: the project's venv has it
  local p
  for p in "${T9K_PYTHON:-}" "$ROOT/.venv/bin/python" python3; do
    [[ -n $p ]] && "$p" -c 'import yaml' 2>/dev/null && { echo "$p"; return 0; }
  done
  die "rendering Kueue's manifests needs python3 with PyYAML ('make setup' makes .venv)"
}

kueue_certs() {  # the webhook serving pair, signed by the cluster's CA, valid for 127.0.0.1
  local d=$KUEUE_STATE/pki
  [[ -f $d/webhook/tls.crt ]] && return 0
  mkdir -p "$d/webhook"
  (
    cd "$d"
    openssl req -newkey rsa:2048 -nodes -subj /CN=kueue-webhook -keyout tls.key -out tls.csr 2>/dev/null
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=serverAuth' 'basicConstraints=critical,CA:FALSE' 'authorityKeyIdentifier=keyid,issuer' >san.ext
    openssl x509 -req -in tls.csr -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
      -extfile san.ext -out tls.crt 2>/dev/null
    chmod 600 tls.key
    cp tls.crt tls.key webhook/
  )
}

kueue_config() {
  cat >"$KUEUE_STATE/config.yaml" <<CFG
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$P_KUEUE_HEALTH"}
metrics: {bindAddress: "127.0.0.1:$P_KUEUE_METRICS"}
webhook: {host: 127.0.0.1, port: $P_KUEUE_WEBHOOK, certDir: "$KUEUE_STATE/pki/webhook"}
leaderElection: {leaderElect: false}
# Its own certificates would name only a Service's DNS name; the API server calls 127.0.0.1.
internalCertManagement: {enable: false}
clientConnection: {qps: 50, burst: 100}
# On by default, it would want a certificate at a fixed path and listen on all interfaces.
# DynamicResourceAllocation (alpha in v0.17): DRA devices of claims from ResourceClaimTemplates
# count against quota, under the logical name their DeviceClass maps to (tests/integration/test_dra.py).
# v0.18 renames it KueueDRAIntegration (on by default) and refuses the old name set true: drop it then.
featureGates: {VisibilityOnDemand: false, DynamicResourceAllocation: true}
resources:
  deviceClassMappings: [{name: dra.t9k.test/gpu, deviceClassNames: [gpu.dra.t9k.test]}]
integrations: {frameworks: [batch/job]}
CFG
}

kueue_install() {
  local mod
  mod=$(cd "$ROOT/tools/kueue" && GOTOOLCHAIN=local go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
  "$(kueue_python)" "$ROOT/scripts/kueue_render.py" "$mod" "$PKI/ca.crt" "$P_KUEUE_WEBHOOK" "$KUEUE_STATE/manifests"
  kubectl_ create namespace kueue-system --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
  # Server-side: the Workload CRD is too large for the last-applied annotation.
  kubectl_ apply --server-side --force-conflicts -f "$KUEUE_STATE/manifests/crds.yaml" >/dev/null
  kubectl_ wait --for condition=Established --timeout=60s -f "$KUEUE_STATE/manifests/crds.yaml" >/dev/null
  kubectl_ apply --server-side --force-conflicts -f "$KUEUE_STATE/manifests/webhooks.yaml" >/dev/null
}

kueue_queues() {  # quota = what the kwok nodes offer, so the queue limits nothing the nodes would not
  local q
  q=$(kubectl_ get nodes -l type=kwok -o json | "$(kueue_python)" -c '
import json, sys
units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
def qty(v):
    for u, m in units.items():
        if v.endswith(u):
            return int(float(v[:-2]) * m)
    return int(float(v[:-1]) / 1000) if v.endswith("m") else int(float(v))
total = {}
for n in json.load(sys.stdin)["items"]:
    for r in ("cpu", "memory", "nvidia.com/gpu", "huawei.com/Ascend910"):
        total[r] = total.get(r, 0) + qty(str(n["status"]["allocatable"].get(r, "0")))
print(" ".join(str(total[r]) for r in ("cpu", "memory", "nvidia.com/gpu", "huawei.com/Ascend910")))')
  read -r cpu mem gpu npu <<<"$q"
  kubectl_ apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu, huawei.com/Ascend910]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "$cpu"}
      - {name: memory, nominalQuota: "$mem"}
      - {name: nvidia.com/gpu, nominalQuota: "$gpu"}
      - {name: huawei.com/Ascend910, nominalQuota: "$npu"}
YAML
}

kueue_answers() { curl -fs "http://127.0.0.1:$P_KUEUE_HEALTH/readyz" >/dev/null 2>&1; }

kueue_start() {
  local p
  for p in "$P_KUEUE_WEBHOOK" "$P_KUEUE_HEALTH" "$P_KUEUE_METRICS"; do
    port_in_use "$p" && die "port $p is in use (another Kueue?); stop it or set the T9K_PORT_KUEUE_* variables"
  done
  local userns=()
  ((EUID == 0)) || userns=(--user --map-root-user)
  rm -rf "$KUEUE_STATE/etc"
  mkdir -p "$KUEUE_STATE/etc/upper" "$KUEUE_STATE/etc/work" "$STATE/logs"
  # With its own certificate management off, Kueue v0.17 reads the metrics certificate from
  # the fixed /etc/kueue/metrics/certs. A private mount namespace lays an overlay on /etc
  # that holds it, so the host's /etc is never written. `exec` keeps the saved PID Kueue's.
  nohup unshare "${userns[@]}" --mount --propagation private -- bash -c '
    set -e
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/etc/upper,workdir=$1/etc/work" /etc
    mkdir -p /etc/kueue/metrics/certs
    cp "$1/pki/tls.crt" "$1/pki/tls.key" /etc/kueue/metrics/certs/
    exec "$2" --config="$1/config.yaml" --kubeconfig="$3" --zap-log-level=2
  ' _ "$KUEUE_STATE" "$KUEUE_BIN/kueue" "$KC" >>"$STATE/logs/kueue.log" 2>&1 </dev/null &
  save_pid kueue $!
  wait_for kueue 60 kueue_answers
}

kueue_up() {
  require_cluster
  pid_alive kube-apiserver || die "the local cluster is not running ('$0 up' first)"
  if pid_alive kueue && kueue_answers; then
    log "Kueue already running (pid $(pid_of kueue))"
    return 0
  fi
  kueue_build
  local t0=$SECONDS
  mkdir -p "$KUEUE_STATE"
  kueue_certs
  kueue_config
  kueue_install
  kueue_start
  kueue_queues
  log "Kueue $KUEUE_VERSION ready in $((SECONDS - t0))s (pid $(pid_of kueue)); ClusterQueue cluster-queue"
}

kueue_down() {
  local pid
  pid=$(pid_of kueue)
  rm -f "$STATE/pids/kueue"
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped kueue:$pid"
  fi
  return 0
}

kueue_status() {
  if pid_alive kueue; then
    echo "kueue: running (pid $(pid_of kueue))"
  elif [[ -d $KUEUE_STATE ]]; then
    echo "kueue: stopped (CRDs and webhooks stay installed: Workload writes fail until '$0 kueue up')"
    return 1
  else
    echo "kueue: not set up ('$0 kueue up')"
    return 1
  fi
}

with_kueue() { [[ ${T9K_WITH_KUEUE:-0} == 1 ]]; }

# -- Helm (the chart in deploy/chart; make deploy-local) ----------------------------------------
helm_built() { [[ "$("$HELM_BIN/helm" version --template '{{.Version}}' 2>/dev/null)" == "$HELM_VERSION" ]]; }

helm_build() {
  helm_built && return 0
  [[ -n $HELM_VERSION ]] || die "no helm.sh/helm/v4 version in tools/helm/go.mod"
  check_go
  mkdir -p "$HELM_BIN" "$CACHE/logs"
  local t0=$SECONDS v=helm.sh/helm/v4/internal/version
  run_build "Helm $HELM_VERSION" "$CACHE/logs/build-helm.log" \
    bash -c "cd '$ROOT/tools/helm' && GOTOOLCHAIN=local CGO_ENABLED=0 nice -n 10 go build -trimpath \
      -ldflags '-s -w -X $v.version=$HELM_VERSION -X $v.metadata= -X $v.gitCommit=module-proxy -X $v.gitTreeState=clean' \
      -o '$HELM_BIN/helm' helm.sh/helm/v4/cmd/helm"
  helm_built || die "the Helm build did not report version $HELM_VERSION"
  log "Helm $HELM_VERSION built in $((SECONDS - t0))s"
}

# -- prefetch: the Go modules of every build not done yet ---------------------------------------
# On a cold machine the Go builds wait on the module proxy for part of their time (Kubernetes'
# modules alone: 606 MB, 48 s here). `.ci/run` starts this in the background first, so those
# downloads overlap the Python install and `make check`, which compute; the builds then find
# the modules in Go's cache (whose own locks make two downloads of one module safe).
prefetch() {
  check_go
  export GOTOOLCHAIN=local
  local dirs=() d kdir t0=$SECONDS
  helm_built || dirs+=(helm)
  built || dirs+=(k8s etcd)
  rn_built || dirs+=(k8s coredns)
  kueue_built || dirs+=(kueue)
  if [[ ! -x $KWOK ]]; then
    kdir=$(cd /tmp && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])') &&
      (cd "$kdir" && GOWORK=off go mod download) &
  fi
  mapfile -t dirs < <(printf '%s\n' "${dirs[@]}" | sort -u | grep .)
  for d in "${dirs[@]}"; do
    (cd "$ROOT/tools/$d" && go mod download) &
  done
  wait
  log "Go modules prefetched in $((SECONDS - t0))s (${dirs[*]:-nothing to build}$([[ -x $KWOK ]] || echo ', kwok'))"
}

# -- images of this package (scripts/images/NAME.conf) -----------------------------------------
# An image is cached by content: its recipe, the build scripts and the package's sources (what
# goes into its wheel). Its tag is the package's version and that content's id, so a changed
# package gets a new tag and `helm upgrade` rolls the controller onto it.
pkg_version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -1; }

image_recipe() {
  local r=$ROOT/scripts/images/$1.conf
  [[ $1 =~ ^[a-z0-9-]+$ && -f $r ]] || die "no image '$1' (recipes: $(cd "$ROOT/scripts/images" && ls -- *.conf | sed 's/\.conf$//' | tr '\n' ' '))"
  echo "$r"
}

image_id() {
  local recipe
  recipe=$(image_recipe "$1")
  {
    # Everything the build reads: its scripts, the vendored constraints, the licence files it copies in.
    cat "$recipe" "$ROOT"/scripts/images/{build.sh,customize.sh,archive.py,requirements.py,constraints.py,labels.py} \
      "$ROOT"/scripts/images/*.txt "$ROOT/scripts/realnode/mkimage.py" "$ROOT"/{LICENSE,NOTICE}
    # An image without this package (WITH_PACKAGE=0: the tests' PostgreSQL) is its recipe alone.
    if ! grep -q '^WITH_PACKAGE=0' "$recipe"; then
      (cd "$ROOT" && find airflow_t9k -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
      # pyproject.toml less its tools' settings (tests, lint, types): what the wheel is made from.
      python3 -c 'import json, sys, tomllib
d = tomllib.load(open(sys.argv[1], "rb"))
for k in ("pytest", "ruff", "mypy", "coverage"):
    d.get("tool", {}).pop(k, None)
print(json.dumps(d, sort_keys=True))' "$ROOT/pyproject.toml" 2>/dev/null || cat "$ROOT/pyproject.toml"
    fi
  } | sha256sum | cut -c1-12
}

image_ref() { echo "localhost/airflow-t9k/$1:$(pkg_version)-$(image_id "$1")"; }
image_tar() { echo "$IMAGES/$1-$(image_id "$1").tar"; }

image_build() {  # name: build unless cached; prints the ref
  local name=$1 tar ref
  image_recipe "$name" >/dev/null
  tar=$(image_tar "$name")
  ref=$(image_ref "$name")
  if [[ ! -f $tar ]]; then
    ((EUID == 0)) || die "building an image runs mmdebstrap and chroot: run as root"
    command -v mmdebstrap >/dev/null || rn_host_packages
    mkdir -p "$IMAGES" "$CACHE/logs"
    local t0=$SECONDS
    run_build "image $ref (Debian packages and PyPI wheels)" "$CACHE/logs/build-image-$name.log" \
      bash "$ROOT/scripts/images/build.sh" "$name" "$tar" "$ref"
    find "$IMAGES" -maxdepth 1 -name "$name-*.tar" ! -path "$tar" -delete  # one per name
    log "image $ref built in $((SECONDS - t0))s: $(du -h "$tar" | cut -f1)"
  fi
  echo "$ref"
}

image_import() {  # name: build unless cached, import into the real node's containerd; prints the ref
  require_cluster
  rn_enabled && pid_alive containerd || die "the cluster runs no real node ('$0 up --real-node'): nothing to import into"
  local ref
  ref=$(image_build "$1")
  rn_import "$(image_tar "$1")"
  echo "$ref"
}

case ${1:-} in
  up | build)
    for arg in "${@:2}"; do
      case $arg in
        --with-kueue) T9K_WITH_KUEUE=1 ;;
        --real-node) T9K_REAL_NODE=1 ;;
        *) die "unknown option '$arg' (--with-kueue, --real-node)" ;;
      esac
    done
    if [[ $1 == build ]]; then
      build
      real_node_wanted && rn_build
      with_kueue && kueue_build
      exit 0
    fi
    with_kueue && kueue_build  # before the cluster starts: a failed build leaves nothing running
    up
    if with_kueue; then kueue_up; fi
    ;;
  down) kueue_down; down_quiet ;;
  status)
    status && rc=0 || rc=$?
    if [[ -f $STATE/pids/kueue || -d $KUEUE_STATE ]]; then kueue_status || true; fi
    exit $rc
    ;;
  kueue)
    case ${2:-} in
      up) kueue_up ;;
      down) kueue_down ;;
      status) kueue_status ;;
      build) kueue_build ;;
      log) tail -n "${3:-50}" "$STATE/logs/kueue.log" ;;
      *) echo "usage: $0 kueue up|down|status|build|log [lines]" >&2; exit 2 ;;
    esac
    ;;
  real-node)
    case ${2:-} in
      build) rn_build ;;
      train-image) rn_train_image ;;
      images) require_cluster; rn_enabled || die "the cluster runs no real node ('$0 up --real-node')"; rn_images ;;
      host-state) rn_host_state ;;
      import)
        require_cluster; rn_enabled || die "the cluster runs no real node ('$0 up --real-node')"
        [[ -f ${3:-} ]] || die "usage: $0 real-node import ARCHIVE.tar (an image archive, as scripts/images/build.sh writes)"
        rn_import "$3" ;;
      *) echo "usage: $0 real-node build|train-image|images|host-state|import TAR   (build: kubelet, kube-proxy, CoreDNS, images; train-image: only the replicas' image; images: import rebuilt images; host-state: the host settings the node changes, as they are now; import: an image archive into the node's containerd)" >&2; exit 2 ;;
    esac
    ;;
  helm) helm_build; echo "$HELM_BIN/helm" ;;
  prefetch) prefetch ;;
  image)
    case ${2:-} in
      build) image_build "${3:?image name (e.g. controller)}" ;;
      import) image_import "${3:?image name (e.g. controller)}" ;;
      ref) image_recipe "${3:?image name}" >/dev/null; image_ref "$3" ;;
      tar) image_recipe "${3:?image name}" >/dev/null; image_tar "$3" ;;
      *) echo "usage: $0 image build|import|ref|tar NAME   (recipes: scripts/images/NAME.conf)" >&2; exit 2 ;;
    esac
    ;;
  env) echo "export KUBECONFIG=$KC" ;;
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
  *) echo "usage: $0 up [--with-kueue] [--real-node]|down|status|env|build|bin|kill C|start C|restart C [seconds]|supervise|kueue up|down|status|build|log|real-node build|train-image|images|host-state|helm|prefetch|image build|import|ref NAME" >&2; exit 2 ;;
esac
