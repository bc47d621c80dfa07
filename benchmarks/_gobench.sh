# Sourced by benchmarks/kubeflow/kubeflow.sh and benchmarks/coscheduling/coscheduling.sh: a Go
# binary built from this directory's own module into the cache, run as one background process
# whose pid is kept in $STATE/pid. The sourcing script sets NAME (its log prefix), HERE (its
# directory), VERSION (upstream's), BIN (the binary's path), CACHE and STATE.

log() { echo "[$NAME] $*" >&2; }
die() { log "error: $*"; exit 1; }
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pid() { cat "$STATE/pid" 2>/dev/null || true; }
alive() { local p; p=$(pid); [[ -n $p ]] && kill -0 "$p" 2>/dev/null; }

# The build's identity: upstream's version and our main's sources, so a changed main is rebuilt.
build_id() { echo "$VERSION-$(cat "$HERE/go.mod" "$HERE"/cmd/*/*.go | sha256sum | cut -c1-12)"; }
built() { [[ -x $BIN && "$(cat "$(dirname "$BIN")/version" 2>/dev/null)" == "$(build_id)" ]]; }

# build WHAT: ./cmd/<binary name> of $HERE's module, niced, its log under the cache.
build() {
  built && { log "built: $BIN"; return 0; }
  command -v go >/dev/null || die "Go >= 1.26 is needed to build $1"
  mkdir -p "$(dirname "$BIN")" "$CACHE/logs"
  local t0=$SECONDS logf=$CACHE/logs/build-$NAME.log
  log "building $1 (log: $logf)"
  if ! (cd "$HERE" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 10 \
        go build -trimpath -o "$BIN" "./cmd/$(basename "$BIN")") >"$logf" 2>&1; then
    tail -30 "$logf" >&2
    die "build failed"
  fi
  build_id >"$(dirname "$BIN")/version"
  log "built in $((SECONDS - t0))s: $BIN"
}

# module_dir MODULE: where the Go module cache holds the module this directory's go.mod requires.
module_dir() {
  (cd "$HERE" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$1")
}

stop() {
  local p i
  p=$(pid)
  if [[ -n $p ]] && kill -0 "$p" 2>/dev/null; then
    kill "$p"
    for i in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
    log "stopped (pid $p)"
  fi
  rm -f "$STATE/pid"
}

status() {
  built && echo "binary: $BIN ($VERSION)" || echo "binary: not built"
  alive && echo "$NAME: running (pid $(pid))" || { echo "$NAME: stopped"; return 1; }
}

# wait_ready LOG CHECK...: until the command CHECK succeeds (30 s at most), while the process
# lives; its log's tail on failure.
wait_ready() {
  local logf=$1 i
  shift
  for i in $(seq 1 300); do
    if "$@"; then
      log "ready (pid $(pid), log $logf)"
      return 0
    fi
    alive || { tail -20 "$logf" >&2; die "$NAME exited"; }
    sleep 0.1
  done
  tail -20 "$logf" >&2
  die "not ready after 30 s"
}
