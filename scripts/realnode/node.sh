# The real node: one kubelet with containerd, runc and a CNI bridge beside the local control
# plane, so replicas run as real processes. Sourced by scripts/local-cluster.sh (which owns
# STATE, CACHE, BIN, PKI, KC, start/answers/wait_for and the supervisor); see docs/real-node.md.
#
# - kubelet and kube-proxy come from the same Kubernetes module as the control plane (tools/k8s);
#   CoreDNS is a slim build of the module in tools/coredns; the sandbox ("pause") image is tools/pause.
# - kube-proxy (iptables mode) gives the node's pods cluster IPs: the `kubernetes` Service, whose
#   endpoint is the API server on the bridge's address (scripts/local-cluster.sh, api_address).
# - containerd, runc and the CNI plugins are Debian's packages (installed here when missing).
# - Images are built from Debian packages with mmdebstrap (scripts/realnode/image.sh) and
#   imported, never pulled: localhost/airflow-t9k/train:1 and localhost/pause:3.10.
# - The node's address is the gateway of a bridge this script creates, so nothing of the real
#   node listens beyond this machine; pods reach each other, CoreDNS and cluster IPs (the API
#   server's among them), nothing else.
# - The node is labelled and tainted t9k.test/real=true (NoSchedule): only jobs that tolerate
#   it land there. kwok manages only nodes annotated kwok.x-k8s.io/node=fake.

RN_NAME=${T9K_REAL_NODE_NAME:-real-node-0}
RN_STATE=$STATE/realnode
RN_CACHE=$CACHE/realnode
RN_BRIDGE=t9kbr0
RN_BRIDGE_MAC=02:00:0a:58:00:01  # locally administered; 0a:58:00:01 is the node's IP, 10.88.0.1
RN_SUBNET=10.88.0.0/16
RN_IP=10.88.0.1
P_KUBELET=${T9K_PORT_KUBELET:-30250}
P_KUBELET_HEALTH=${T9K_PORT_KUBELET_HEALTH:-30248}
P_DNS_HEALTH=${T9K_PORT_DNS_HEALTH:-30280}
P_DNS_READY=${T9K_PORT_DNS_READY:-30281}
P_PROXY_HEALTH=${T9K_PORT_KUBE_PROXY_HEALTH:-30256}
P_PROXY_METRICS=${T9K_PORT_KUBE_PROXY_METRICS:-30249}
RN_SERVICE_CIDR=10.96.0.0/16  # the API server's --service-cluster-ip-range
RN_COMPONENTS=(containerd coredns kubelet kube-proxy)
RN_SOCK=$RN_STATE/containerd/containerd.sock
RN_HOST_PACKAGES=(containerd runc containernetworking-plugins mmdebstrap iptables iproute2)
RN_TRAIN_IMAGE=localhost/airflow-t9k/train:1
RN_PAUSE_IMAGE=localhost/pause:3.10
# Host settings the kubelet and the bridge plugin change; saved on `up`, restored on `down`.
# kube-proxy is told to leave conntrack and route_localnet alone; they are listed so a change shows.
RN_SYSCTLS=(net.ipv4.ip_forward vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait)

rn_enabled() { [[ -f $RN_STATE/enabled ]]; }

rn_ctr() { ctr -a "$RN_SOCK" -n k8s.io "$@"; }

rn_image_id() {  # the build's identity: a changed image script or package list rebuilds the image
  cat "$ROOT"/scripts/realnode/{image.sh,image-customize.sh,mkimage.py} | sha256sum | cut -c1-16  # contents, not paths
}

rn_image_tar() { echo "$RN_CACHE/images/train-$(rn_image_id).tar"; }

rn_built() {
  [[ "$("$BIN/kubelet" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]] &&
    [[ "$("$BIN/kube-proxy" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]] &&
    [[ -x $RN_CACHE/bin/coredns && -f $RN_CACHE/images/pause.tar && -f $(rn_image_tar) ]] &&
    command -v containerd >/dev/null && command -v runc >/dev/null && [[ -x /usr/lib/cni/bridge ]]
}

rn_host_packages() {
  local missing=()
  command -v containerd >/dev/null && command -v ctr >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local ]] || missing+=(containernetworking-plugins)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v ip >/dev/null || missing+=(iproute2)
  ((${#missing[@]})) || return 0
  ((EUID == 0)) || die "the real node needs Debian's ${missing[*]}: apt-get install -y ${RN_HOST_PACKAGES[*]}"
  log "installing ${missing[*]} from Debian's packages"
  # The lock timeout: `.ci/run` builds the images beside the Go builds, so two of these may meet.
  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 \
    --no-install-recommends "${RN_HOST_PACKAGES[@]}" >/dev/null
  # Debian's containerd package may start a system containerd; ours runs with its own socket
  # and state, so that one is left as the package set it up.
}

rn_build() {
  ((EUID == 0)) || die "the real node runs containers as root: run as root"
  rn_host_packages
  rn_built && return 0
  check_go
  mkdir -p "$RN_CACHE/bin" "$RN_CACHE/images" "$CACHE/logs"
  export GOTOOLCHAIN=local CGO_ENABLED=0
  local t0=$SECONDS
  local cmd node_bins=()
  for cmd in kubelet kube-proxy; do
    [[ "$("$BIN/$cmd" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]] || node_bins+=("k8s.io/kubernetes/cmd/$cmd")
  done
  if ((${#node_bins[@]})); then
    run_build "${node_bins[*]##*/} $K8S_VERSION" "$CACHE/logs/build-kubelet.log" \
      bash -c "cd '$ROOT/tools/k8s' && nice -n 10 go build -trimpath -tags selinux,notest,grpcnotrace -ldflags '$(ldflags)' -o '$BIN/' ${node_bins[*]}"
  fi
  if [[ ! -x $RN_CACHE/bin/coredns ]]; then
    run_build "CoreDNS (tools/coredns)" "$CACHE/logs/build-coredns.log" \
      bash -c "cd '$ROOT/tools/coredns' && nice -n 10 go build -trimpath -ldflags '-s -w' -o '$RN_CACHE/bin/coredns' ."
  fi
  if [[ ! -f $RN_CACHE/images/pause.tar ]]; then
    local p=$RN_CACHE/pause
    rm -rf "$p" && mkdir -p "$p/rootfs"
    run_build "pause (tools/pause)" "$CACHE/logs/build-pause.log" \
      bash -c "cd '$ROOT/tools/pause' && go build -trimpath -ldflags '-s -w' -o '$p/rootfs/pause' . &&
        tar -C '$p/rootfs' -cf '$p/rootfs.tar' . &&
        python3 '$ROOT/scripts/realnode/mkimage.py' '$p/rootfs.tar' $RN_PAUSE_IMAGE --out '$RN_CACHE/images/pause.tar' --cmd '[\"/pause\"]'"
    rm -rf "$p"
  fi
  rn_train_image
  log "real node built in $((SECONDS - t0))s"
}

rn_train_image() {  # the replicas' image, from Debian packages and PyPI: mostly downloads
  [[ -f $(rn_image_tar) ]] && return 0
  ((EUID == 0)) || die "building an image runs mmdebstrap and chroot: run as root"
  rn_host_packages
  mkdir -p "$RN_CACHE/images" "$CACHE/logs"
  # `.ci/run` starts this in the background and `build --real-node` may reach it meanwhile:
  # the second waits for the first, then finds the image built.
  (
    flock 9
    [[ -f $(rn_image_tar) ]] && exit 0
    rm -f "$RN_CACHE"/images/train-*.tar
    run_build "image $RN_TRAIN_IMAGE (Debian packages; several minutes)" "$CACHE/logs/build-train-image.log" \
      bash "$ROOT/scripts/realnode/image.sh" "$RN_CACHE/images/work" "$(rn_image_tar)" "$RN_TRAIN_IMAGE"
  ) 9>"$RN_CACHE/images/train.lock"
}

# -- certificates and configuration -----------------------------------------------------------
rn_cert() {  # name, subject, extendedKeyUsage, [subjectAltName]: a pair signed by the cluster CA
  local name=$1 subj=$2 eku=$3 san=${4:-}
  (
    cd "$RN_STATE/pki"
    openssl req -newkey rsa:2048 -nodes -subj "$subj" -keyout "$name.key" -out "$name.csr" 2>/dev/null
    {
      echo 'keyUsage=critical,digitalSignature,keyEncipherment'
      echo "extendedKeyUsage=$eku"
      echo 'basicConstraints=critical,CA:FALSE'
      [[ -n $san ]] && echo "subjectAltName=$san"
    } >"$name.ext"
    openssl x509 -req -in "$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
      -CAserial "$RN_STATE/pki/ca.srl" -days 3650 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    chmod 600 "$name.key"
  )
}

rn_kubeconfig() {  # file, cert name: a kubeconfig that authenticates with that client certificate
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$(api_address):$P_API", certificate-authority: "$PKI/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$RN_STATE/pki/$2.crt", client-key: "$RN_STATE/pki/$2.key"}
contexts:
- name: local
  context: {cluster: local, user: $2}
current-context: local
EOF
  chmod 600 "$1"
}

rn_configure() {
  mkdir -p "$RN_STATE"/{pki,logs,kubelet,cni/net.d,cni/ipam,cni/cache,containerd} "$RN_CACHE/containerd"
  # The kubelet: a node identity (the Node authorizer and NodeRestriction scope it to its own
  # node and pods) and a serving certificate the API server verifies.
  rn_cert kubelet-client "/O=system:nodes/CN=system:node:$RN_NAME" clientAuth
  rn_cert kubelet-serving "/O=system:nodes/CN=system:node:$RN_NAME" serverAuth "IP:$RN_IP,DNS:$RN_NAME"
  rn_cert coredns "/CN=system:airflow-t9k:coredns" clientAuth
  # kube-proxy as Kubernetes names it: bound to system:node-proxier by the API server's own policy.
  rn_cert kube-proxy "/CN=system:kube-proxy" clientAuth
  rn_kubeconfig "$RN_STATE/kubelet.kubeconfig" kubelet-client
  rn_kubeconfig "$RN_STATE/coredns.kubeconfig" coredns
  rn_kubeconfig "$RN_STATE/kube-proxy.kubeconfig" kube-proxy
  : >"$RN_STATE/resolv.conf"  # pods get cluster DNS only, never the host's search domains
  cat >"$RN_STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$RN_SOCK
address: $RN_IP
port: $P_KUBELET
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $P_KUBELET_HEALTH
enableDebuggingHandlers: true
tlsCertFile: $RN_STATE/pki/kubelet-serving.crt
tlsPrivateKeyFile: $RN_STATE/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
registerNode: true
registerWithTaints:
- {key: t9k.test/real, value: "true", effect: NoSchedule}
clusterDomain: cluster.local
clusterDNS: [$RN_IP]
resolvConf: $RN_STATE/resolv.conf
failSwapOn: false
maxPods: 40
serializeImagePulls: false
# In-place restarts (docs/disruptions.md): on by default in 1.36; named so the node declares
# RestartAllContainersOnContainerExits in status.declaredFeatures whatever the defaults become.
featureGates: {ContainerRestartRules: true, RestartAllContainersOnContainerExits: true, NodeDeclaredFeatures: true}
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 100
nodeStatusReportFrequency: 10s
EOF
  cat >"$RN_STATE/containerd.toml" <<EOF
version = 2
root = "$RN_CACHE/containerd"
state = "$RN_STATE/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$RN_SOCK"
[ttrpc]
  address = "$RN_SOCK.ttrpc"
[debug]
  address = "$RN_STATE/containerd/debug.sock"
  level = "info"
[plugins."io.containerd.internal.v1.opt"]
  path = "$RN_STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$RN_PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  # Some VMs deny root CAP_SYS_RESOURCE: the kubelet's negative oom_score_adj for sandboxes
  # then fails in runc ("can't get final child's PID from pipe"). Harmless elsewhere.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RN_STATE/cni/net.d"
    max_conf_num = 1
EOF
  # No masquerade and no default route: pods reach each other, the gateway and cluster IPs
  # (routed to the gateway, where kube-proxy's rules translate them), nothing else.
  cat >"$RN_STATE/cni/net.d/10-t9k-real.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "t9k-real", "plugins": [{"type": "bridge", "bridge": "$RN_BRIDGE",
  "isGateway": true, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local", "dataDir": "$RN_STATE/cni/ipam",
           "ranges": [[{"subnet": "$RN_SUBNET", "gateway": "$RN_IP"}]],
           "routes": [{"dst": "$RN_SUBNET"}, {"dst": "$RN_SERVICE_CIDR"}]}}]}
EOF
  # iptables mode (Debian's iptables): NodePorts only on the node's bridge address, conntrack and
  # route_localnet left as they are (0 and false mean "do not set"), no OOM score change (root
  # here may not lower one).
  cat >"$RN_STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $RN_STATE/kube-proxy.kubeconfig}
hostnameOverride: $RN_NAME
mode: iptables
clusterCIDR: $RN_SUBNET
detectLocalMode: ClusterCIDR
bindAddress: $RN_IP
healthzBindAddress: 127.0.0.1:$P_PROXY_HEALTH
metricsBindAddress: 127.0.0.1:$P_PROXY_METRICS
nodePortAddresses: [$RN_IP/32]
oomScoreAdj: 0
iptables: {localhostNodePorts: false, masqueradeAll: false}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  # Cluster DNS for the node's pods, bound to the bridge gateway only. Names outside
  # cluster.local are not forwarded: pods have no way out of this machine.
  cat >"$RN_STATE/Corefile" <<EOF
.:53 {
    bind $RN_IP
    health 127.0.0.1:$P_DNS_HEALTH
    ready 127.0.0.1:$P_DNS_READY
    errors
    cache 5
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $RN_STATE/coredns.kubeconfig local
        pods insecure
    }
}
EOF
}

rn_rbac() {  # what CoreDNS reads, and the API server's right to reach the kubelet (logs, exec)
  kubectl_ apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "airflow-t9k:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "airflow-t9k:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "airflow-t9k:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:airflow-t9k:coredns"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "airflow-t9k:apiserver-kubelet-client"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "kube-apiserver-kubelet-client"}]
EOF
}

# -- host network and settings ------------------------------------------------------------------
rn_bridge_up() {
  if ip link show "$RN_BRIDGE" >/dev/null 2>&1 && [[ ! -f $RN_STATE/bridge ]]; then
    # Another checkout's node has pods on it; a bridge with none attached was left by a run
    # that died before its `down`, and is taken over.
    [[ -z $(ip -o link show master "$RN_BRIDGE" 2>/dev/null) ]] ||
      die "bridge $RN_BRIDGE is in use by another real node (another checkout's?); one real node per machine"
    log "taking over bridge $RN_BRIDGE, left without pods by an earlier run"
  fi
  touch "$RN_STATE/bridge"
  ip link show "$RN_BRIDGE" >/dev/null 2>&1 || ip link add "$RN_BRIDGE" type bridge
  # A bridge without an address of its own takes the lowest of its ports' and changes it as pods
  # come and go; every pod's ARP entry for the gateway (and CoreDNS on it) then points at a MAC
  # nobody answers for, and its DNS queries are lost for up to half a minute (a ColossalAI
  # launcher failed "Temporary failure in name resolution" that way). A set address never moves.
  ip link set "$RN_BRIDGE" address "$RN_BRIDGE_MAC"
  # Not `ip ... | grep -q`: under pipefail, grep leaving at its first match can end `ip` with
  # SIGPIPE, and the address then looks absent (CI, stop 51: "ipv4: Address already assigned").
  [[ $(ip -o -4 addr show dev "$RN_BRIDGE") == *" $RN_IP/"* ]] || ip addr add "$RN_IP/16" dev "$RN_BRIDGE"
  ip link set "$RN_BRIDGE" up
}

rn_save_sysctls() {
  [[ -f $RN_STATE/sysctl.before ]] && return 0
  sysctl -e "${RN_SYSCTLS[@]}" 2>/dev/null | sed 's/ //g' >"$RN_STATE/sysctl.before"
}

rn_import() {  # archive: import it unless containerd has it already (it keeps its content in the cache)
  local tar=$1 stamp ref
  # The archive's name, size and time: a rebuilt archive is imported again.
  stamp=$RN_CACHE/containerd/imported-$(basename "$tar")-$(stat -c %s-%Y "$tar")
  if [[ -f $stamp ]] && grep -xF "$(cat "$stamp")" <<<"$(rn_ctr images ls -q)" >/dev/null; then return 0; fi
  # One import of an archive at a time (scripts/test.sh preloads the deploy tests' images while
  # their fixtures may ask for them): the second finds the first's stamp.
  (
    flock 9
    if [[ -f $stamp ]] && grep -xF "$(cat "$stamp")" <<<"$(rn_ctr images ls -q)" >/dev/null; then exit 0; fi
    log "importing $(basename "$tar") into containerd"
    rn_ctr images import "$tar" >/dev/null
    ref=$(tar -xOf "$tar" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["RepoTags"][0])')
    rm -f "$RN_CACHE/containerd/imported-$(basename "$tar")"-*
    echo "$ref" >"$stamp"
  ) 9>"$RN_CACHE/containerd/import-$(basename "$tar").lock"
}

rn_images() {  # the node's own images
  local tar
  for tar in "$RN_CACHE/images/pause.tar" "$(rn_image_tar)"; do rn_import "$tar"; done
}

rn_node_ready() {
  [[ $(kubectl_ get node "$RN_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

rn_prepare() {  # before the API server starts: it listens on the bridge's address
  mkdir -p "$RN_STATE"
  touch "$RN_STATE/enabled"
  rn_save_sysctls
  rn_bridge_up
}

rn_up() {
  rn_build
  for p in "$P_KUBELET_HEALTH" "$P_DNS_HEALTH" "$P_DNS_READY" "$P_PROXY_HEALTH" "$P_PROXY_METRICS"; do
    port_in_use "$p" && die "port $p is in use; stop that process or set T9K_PORT_KUBELET_HEALTH / T9K_PORT_DNS_* / T9K_PORT_KUBE_PROXY_*"
  done
  rn_prepare
  rn_configure
  rn_rbac
  local t0=$SECONDS
  # Image snapshots unpacked before the components ran with umask 022 have 0700 roots, which a
  # container running as non-root cannot enter (the controller's image runs as uid 65532).
  find "$RN_CACHE/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots" -mindepth 2 -maxdepth 2 -name fs \
    -perm 0700 -exec chmod 0755 {} + 2>/dev/null || true
  start containerd
  wait_for containerd 30 answers containerd
  rn_images
  start coredns
  wait_for coredns 30 answers coredns
  start kubelet
  wait_for kubelet 90 rn_node_ready
  start kube-proxy
  wait_for kube-proxy 60 answers kube-proxy
  COMPONENTS+=("${RN_COMPONENTS[@]}")
  log "real node $RN_NAME Ready in $((SECONDS - t0))s ($RN_IP on bridge $RN_BRIDGE; image $RN_TRAIN_IMAGE)"
}

rn_stop_pid() {  # component: TERM, wait, KILL
  local n=$1 pid
  pid=$(pid_of "$n")
  rm -f "$STATE/pids/$n"
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
}

rn_host_state() {  # what `down` must leave as `up` found it: .ci/run compares the two
  local -
  set +e +o pipefail  # what is absent (no bridge, no chains, no mounts) prints nothing, not an error
  sysctl -e "${RN_SYSCTLS[@]}" 2>/dev/null | sed 's/ //g'
  ip -o link show "$RN_BRIDGE" 2>/dev/null | awk '{print "link", $2}'
  ip netns list 2>/dev/null | awk '/^cni-/ {print "netns", $1}'
  local ipt
  for ipt in iptables ip6tables; do
    command -v $ipt-save >/dev/null || continue
    $ipt-save 2>/dev/null | grep -E '^:KUBE-|-j KUBE-' | sed -e 's/ \[[0-9:]*\]$//' -e "s/^/$ipt /"
  done
  grep -E " ($RN_STATE|$RN_CACHE/containerd|/run/containerd/io.containerd)[^ ]* " /proc/mounts | awk '{print "mount", $2}'
  ls -d /sys/fs/cgroup/kubepods* /sys/fs/cgroup/*/kubepods 2>/dev/null | sed 's/^/cgroup /'
  return 0
}

rn_down() {  # the node's pods, its processes, and every change to the host
  [[ -d $RN_STATE ]] || return 0
  local -
  set +e  # best effort: each step runs whatever the one before it left
  if pid_alive kube-apiserver && pid_alive kubelet; then
    # While the kubelet still runs, so it stops the containers and releases their addresses.
    kubectl_ delete pods -A --field-selector "spec.nodeName=$RN_NAME" --grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 || true
  fi
  rn_stop_pid kubelet
  rn_stop_pid kube-proxy
  # Its rules (iptables and ip6tables, every KUBE-* chain it made), whatever mode it ran in.
  mkdir -p "$RN_STATE/logs"
  [[ -x $BIN/kube-proxy ]] && "$BIN/kube-proxy" --cleanup >"$RN_STATE/logs/kube-proxy-cleanup.log" 2>&1
  pid_alive kube-apiserver && kubectl_ delete node "$RN_NAME" --ignore-not-found >/dev/null 2>&1
  if [[ -S $RN_SOCK ]]; then
    local c
    for c in $(rn_ctr tasks ls -q 2>/dev/null); do rn_ctr tasks kill -s SIGKILL "$c" >/dev/null 2>&1; done
    sleep 0.5
    for c in $(rn_ctr containers ls -q 2>/dev/null); do
      rn_ctr tasks delete -f "$c" >/dev/null 2>&1
      rn_ctr containers rm "$c" >/dev/null 2>&1
    done
  fi
  rn_stop_pid coredns
  rn_stop_pid containerd
  # What the processes leave: mounts (deepest first), the CNI network namespaces, cgroups,
  # the bridge, the kubelet's iptables chains, and the sysctls it changed.
  grep -E " ($RN_STATE|$RN_CACHE/containerd|/run/containerd/io.containerd)[^ ]* " /proc/mounts | awk '{print $2}' | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null; done
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-' || true); do ip netns delete "$ns" 2>/dev/null; done
  local c
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  if [[ -f $RN_STATE/bridge ]]; then ip link del "$RN_BRIDGE" 2>/dev/null; rm -f "$RN_STATE/bridge"; fi
  local ipt hook tbl ch
  for ipt in iptables ip6tables; do
    command -v $ipt >/dev/null || continue
    for hook in INPUT OUTPUT; do while $ipt -D $hook -j KUBE-FIREWALL 2>/dev/null; do :; done; done
    for tbl in mangle nat filter; do
      for ch in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        $ipt -t $tbl -F $ch 2>/dev/null && $ipt -t $tbl -X $ch 2>/dev/null
      done
    done
  done
  if [[ -f $RN_STATE/sysctl.before ]]; then
    xargs -r -n1 sysctl -q -w <"$RN_STATE/sysctl.before" 2>/dev/null || true
    rm -f "$RN_STATE/sysctl.before"
  fi
  rm -f "$RN_STATE/enabled"
  log "real node $RN_NAME down; host settings restored"
}

rn_component_cmd() {  # name: sets CMD (for component_cmd)
  case $1 in
    containerd) CMD=(containerd --config "$RN_STATE/containerd.toml") ;;
    coredns) CMD=("$RN_CACHE/bin/coredns" -conf "$RN_STATE/Corefile") ;;
    kube-proxy) CMD=("$BIN/kube-proxy" --config="$RN_STATE/kube-proxy.yaml" -v=1) ;;
    kubelet) CMD=("$BIN/kubelet" --config="$RN_STATE/kubelet.yaml" --kubeconfig="$RN_STATE/kubelet.kubeconfig"
      --hostname-override="$RN_NAME" --node-ip="$RN_IP" --root-dir="$RN_STATE/kubelet"
      --cert-dir="$RN_STATE/pki" --node-labels=t9k.test/real=true,type=real -v=1) ;;
    *) return 1 ;;
  esac
}

rn_answers() {
  case $1 in
    containerd) rn_ctr version ;;
    coredns) curl -fs "http://127.0.0.1:$P_DNS_READY/ready" ;;
    kubelet) curl -fs "http://127.0.0.1:$P_KUBELET_HEALTH/healthz" ;;
    kube-proxy) curl -fs "http://127.0.0.1:$P_PROXY_HEALTH/healthz" ;;
    *) return 1 ;;
  esac
}
