# shellcheck shell=bash disable=SC2034 # the layout variables are used by the scripts that source this
# Shared by the deploy/local scripts: layout, addresses, logging, waiting and PID files.
# Everything the local cluster writes lives under $STATE (.local/ at the repository root).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
LOCAL=$ROOT/deploy/local
BIN=$ROOT/bin
STATE=$ROOT/.local
RUN=$STATE/run     # PID files and sockets
LOGS=$STATE/logs   # one log per component
ETC=$STATE/etc     # rendered configuration
PKI=$STATE/pki
KUBECONFIG_FILE=$STATE/kubeconfig

# The Go toolchain named in go.mod, as the Makefile exports it, so a script run by hand builds with
# the same Go (and matches the build stamps in bin/.stamps).
GOTOOLCHAIN=$(awk '/^toolchain /{print $2}' "$ROOT/go.mod")
export GOTOOLCHAIN

# The node and its networks. The pod subnet's gateway is also the node's address: the kubelet,
# the apiserver relay and Jaeger's second OTLP receiver listen on it, so Pods reach them.
NODE_NAME=readyspan-node
BRIDGE=readyspan0
POD_CIDR=10.88.77.0/24
NODE_IP=10.88.77.1
SERVICE_CIDR=10.96.0.0/16
CGROUP_ROOT=readyspan-node   # the kubelet's cgroupRoot, made in every cgroup v1 hierarchy

# Addresses (127.0.0.1 unless noted).
ETCD_PORT=12379
APISERVER_PORT=16443        # also on $NODE_IP through the relay
KCM_PORT=20257
SCHEDULER_PORT=20259
KUBELET_PORT=20250          # on $NODE_IP
KUBELET_HEALTHZ_PORT=20248
KUBE_PROXY_HEALTHZ_PORT=20256
KUBE_PROXY_METRICS_PORT=20249
# kube-proxy's mode at cluster-up (iptables or nftables); scripts/kube-proxy.sh switches a running one.
KUBE_PROXY_MODE=${KUBE_PROXY_MODE:-iptables}
REGISTRY=127.0.0.1:5000
JAEGER_QUERY=127.0.0.1:16686
JAEGER_OTLP_GRPC_PORT=4317  # on 127.0.0.1 and $NODE_IP
JAEGER_OTLP_HTTP_PORT=4318  # on 127.0.0.1 and $NODE_IP
OTLP_CAPTURE_PORT=4319      # make e2e: the tests' OTLP witness (test/e2e/otlpcapture), forwarding to Jaeger
COMPONENTS_OTLP_PORT=4320   # Jaeger's receiver for the components' own spans (apiserver, kubelet, containerd)
READYSPAN_OTLP_PORT=4321    # readyspan run --otlp-receive: Jaeger forwards the components' spans to it
JAEGER_HEALTH=127.0.0.1:13133
PROMETHEUS=127.0.0.1:9090
READYSPAN_METRICS=127.0.0.1:8080
WEBHOOK=127.0.0.1:9443      # the admission webhook server (localwebhook), called by the apiserver
ROLLOUTS_METRICS_PORT=20290 # capture-rollout.sh: Argo Rollouts' controller (on 0.0.0.0: it takes
ROLLOUTS_HEALTHZ_PORT=20291 # only ports); its defaults, 8090 and 8080, clash with readyspan's
KARPENTER_METRICS_PORT=20292 # karpenter.sh: Karpenter (KWOK provider; on 0.0.0.0, it takes only
KARPENTER_HEALTH_PORT=20293  # ports); its defaults, 8080 and 8081, clash with readyspan's
KARPENTER_KWOK_PORT=20294    # karpenter.sh: the kwok that makes Karpenter's Nodes Ready (127.0.0.1)
NETWORK_POLICIES_METRICS_PORT=20295 # network-policies.sh: kube-network-policies' metrics (127.0.0.1)
READYSPAN_NODE_METRICS=127.0.0.1:20296 # readyspan-node.sh: the node component's /metrics and /healthz

# Images in the local registry (built offline by `localregistry images`).
BUSYBOX_IMAGE=$REGISTRY/readyspan/busybox:v1
PAUSE_IMAGE=$REGISTRY/readyspan/pause:v1
COLD_REPO=readyspan/cold     # every tag is created on first pull; its blobs wait $COLD_BLOB_DELAY
COLD_BLOB_DELAY=${COLD_BLOB_DELAY:-2s}

# The node's kubelet and container runtime. The control plane is v1.37; under the version-skew
# policy its nodes may run kubelet 1.34 to 1.37 (make e2e KUBELET_VERSION=1.34, built on demand by
# build.sh kubelet-1.34). CONTAINERD_VERSION: 2 (bin/containerd, built from its Go module), 1.7
# (bin/containerd-1.7, build.sh containerd-1.7) or 1.6 (Debian's package); unset, 2 when built,
# else 1.6.
CONTROL_PLANE_MINOR=1.37
KUBELET_VERSIONS=(1.34 1.35 1.36 1.37)
KUBELET_VERSION=${KUBELET_VERSION:-$CONTROL_PLANE_MINOR}
if [ -z "${CONTAINERD_VERSION:-}" ]; then
  CONTAINERD_VERSION=1.6
  [ -x "$BIN/containerd" ] && [ -x "$BIN/containerd-shim-runc-v2" ] && CONTAINERD_VERSION=2
fi

# kubelet_binary: the kubelet binary of KUBELET_VERSION (the control plane's own for 1.37).
kubelet_binary() {
  local v
  for v in "${KUBELET_VERSIONS[@]}"; do
    if [ "$v" = "$KUBELET_VERSION" ]; then
      if [ "$v" = "$CONTROL_PLANE_MINOR" ]; then echo "$BIN/kubelet"; else echo "$BIN/kubelet-$v"; fi
      return 0
    fi
  done
  echo "error: KUBELET_VERSION=$KUBELET_VERSION is not one of ${KUBELET_VERSIONS[*]} (the control plane is $CONTROL_PLANE_MINOR)" >&2
  return 1
}

# node_kubelet_minor: the running node's kubelet as 1.NN, from Node.status.nodeInfo.
node_kubelet_minor() {
  kubectl get node "$NODE_NAME" -o jsonpath='{.status.nodeInfo.kubeletVersion}' 2>/dev/null |
    sed -E 's/^v([0-9]+\.[0-9]+)\..*/\1/'
}

# Debian packages the node needs: command -> package ("dpkg:" checks the package itself: the test
# images need the static busybox, not the dynamic one of the package busybox).
APT_PACKAGES=(
  "runc:runc" "iptables:iptables" "nft:nftables" "conntrack:conntrack" "socat:socat"
  "openssl:openssl" "curl:curl" "jq:jq" "dpkg:busybox-static" "ctr:containerd"
  "/usr/lib/cni/bridge:containernetworking-plugins"
  "chromium:chromium" # the browser tests of the web UI and the HTML report (make e2e)
)

mkdir -p "$RUN" "$LOGS" "$ETC"

T0=$(date +%s.%N)
_step_start=$T0
_step_name=""

elapsed() { # seconds since $1, one decimal
  awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}
log() { printf '%s\n' "$*"; }
# step NAME: start a timed step; the previous one is reported as done.
step() {
  step_done
  _step_name=$1
  _step_start=$(date +%s.%N)
  printf '  %-26s ... ' "$_step_name"
}
step_done() {
  [ -n "$_step_name" ] || return 0
  printf 'ok (%ss, total %ss)\n' "$(elapsed "$_step_start")" "$(elapsed "$T0")"
  _step_name=""
}
step_skip() { # a message instead of "ok"
  printf 'skipped: %s\n' "$*"
  _step_name=""
}

# die COMPONENT MESSAGE: one clear message and the tail of the component's log.
die() {
  local component=$1; shift
  [ -n "$_step_name" ] && printf 'FAILED\n'
  _step_name=""
  printf '\nerror: %s: %s\n' "$component" "$*" >&2
  if [ -s "$LOGS/$component.log" ]; then
    printf -- '--- last lines of %s ---\n' "${LOGS#"$ROOT"/}/$component.log" >&2
    tail -n 25 "$LOGS/$component.log" >&2
    printf -- '---\n' >&2
  fi
  exit 1
}

pid_of() { cat "$RUN/$1.pid" 2>/dev/null || true; }
running() { local p; p=$(pid_of "$1"); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }

# lock_cluster: one of up/down/demo/e2e at a time on this checkout (a down.sh during someone's
# e2e run breaks it). Scripts they call inherit the lock. Fails at once when it is taken.
lock_cluster() {
  [ -n "${READYSPAN_LOCAL_LOCK_HELD:-}" ] && return 0
  exec 9>"$STATE/lock"
  if ! flock -n 9; then
    echo "error: another deploy/local script is using the local cluster: $(cat "$STATE/lock.owner" 2>/dev/null || echo unknown)" >&2
    echo "       wait for it to finish (or stop it), then retry" >&2
    exit 1
  fi
  echo "$(basename "$0") (pid $$, started $(date -u +%FT%TZ))" >"$STATE/lock.owner"
  export READYSPAN_LOCAL_LOCK_HELD=1
}

# start NAME CMD...: run CMD in the background, log to $LOGS/NAME.log, PID to $RUN/NAME.pid.
# The daemon inherits no descriptor but its standard three: not the cluster lock's, nor any the
# caller holds (a CI job's flock on a lock file, the pipe of `e2e.sh | tee`), which a daemon
# would otherwise hold for its whole life, and with them the caller's lock or its pipe's end.
start() {
  local name=$1; shift
  printf '=== %s: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$LOGS/$name.log"
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid nohup "$@" >>"$LOGS/$name.log" 2>&1 </dev/null
  ) &
  echo $! >"$RUN/$name.pid"
}

# wait_for NAME TIMEOUT_SECONDS CMD...: until CMD succeeds; fails early if NAME's process died.
wait_for() {
  local name=$1 timeout=$2; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  while ! "$@" >/dev/null 2>&1; do
    if [ -f "$RUN/$name.pid" ] && ! running "$name"; then
      die "$name" "exited during start-up"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || die "$name" "not healthy after ${timeout}s (waiting for: $*)"
    sleep 0.25
  done
}

# stop NAME [TIMEOUT]: SIGTERM the recorded PID, SIGKILL after TIMEOUT seconds.
stop() {
  local name=$1 timeout=${2:-10} p
  p=$(pid_of "$name")
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill "$p" 2>/dev/null || true
    local i
    for ((i = 0; i < timeout * 4; i++)); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.25
    done
    if kill -0 "$p" 2>/dev/null; then
      printf '(%s did not stop in %ss: killed) ' "$name" "$timeout"
      kill -9 "$p" 2>/dev/null || true
    fi
  fi
  rm -f "$RUN/$name.pid"
}

# render TEMPLATE DEST: copy a deploy/local/config template, filling in @NAME@ placeholders.
render() {
  mkdir -p "$(dirname "$2")"
  sed -e "s|@ROOT@|$ROOT|g" -e "s|@STATE@|$STATE|g" -e "s|@BIN@|$BIN|g" -e "s|@ETC@|$ETC|g" \
    -e "s|@PKI@|$PKI|g" -e "s|@RUN@|$RUN|g" -e "s|@NODE_NAME@|$NODE_NAME|g" -e "s|@NODE_IP@|$NODE_IP|g" \
    -e "s|@BRIDGE@|$BRIDGE|g" -e "s|@POD_CIDR@|$POD_CIDR|g" -e "s|@SERVICE_CIDR@|$SERVICE_CIDR|g" \
    -e "s|@CGROUP_ROOT@|$CGROUP_ROOT|g" -e "s|@REGISTRY@|$REGISTRY|g" -e "s|@PAUSE_IMAGE@|$PAUSE_IMAGE|g" \
    -e "s|@APISERVER_PORT@|$APISERVER_PORT|g" -e "s|@KUBELET_PORT@|$KUBELET_PORT|g" \
    -e "s|@KUBELET_HEALTHZ_PORT@|$KUBELET_HEALTHZ_PORT|g" -e "s|@KUBE_PROXY_HEALTHZ_PORT@|$KUBE_PROXY_HEALTHZ_PORT|g" \
    -e "s|@KUBE_PROXY_METRICS_PORT@|$KUBE_PROXY_METRICS_PORT|g" \
    -e "s|@KUBE_PROXY_MODE@|$KUBE_PROXY_MODE|g" -e "s|@JAEGER_QUERY@|$JAEGER_QUERY|g" \
    -e "s|@JAEGER_HEALTH@|$JAEGER_HEALTH|g" -e "s|@JAEGER_OTLP_GRPC_PORT@|$JAEGER_OTLP_GRPC_PORT|g" \
    -e "s|@JAEGER_OTLP_HTTP_PORT@|$JAEGER_OTLP_HTTP_PORT|g" -e "s|@READYSPAN_METRICS@|$READYSPAN_METRICS|g" \
    -e "s|@WEBHOOK@|$WEBHOOK|g" \
    -e "s|@COMPONENTS_OTLP_PORT@|$COMPONENTS_OTLP_PORT|g" -e "s|@READYSPAN_OTLP_PORT@|$READYSPAN_OTLP_PORT|g" \
    "$LOCAL/config/$1" >"$2"
}

# check_kube_proxy_mode: KUBE_PROXY_MODE is one kube-proxy here runs in (the config is rendered from it).
check_kube_proxy_mode() {
  case $KUBE_PROXY_MODE in
    iptables | nftables) ;;
    *) echo "error: KUBE_PROXY_MODE=$KUBE_PROXY_MODE: want iptables or nftables" >&2; exit 1 ;;
  esac
}

# kube_proxy_mode: the mode the running kube-proxy was started in (its rendered config), or
# "unknown" before the first cluster-up.
kube_proxy_mode() {
  sed -n 's/^mode: *\([a-z]*\).*/\1/p' "$ETC/kube-proxy.yaml" 2>/dev/null | grep . || echo unknown
}

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# api PATH: GET from the apiserver as admin (no kubectl needed).
api() {
  curl -sf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT$1"
}

# ensure_packages: install the Debian packages the node needs when their commands are missing.
ensure_packages() {
  local missing=() entry cmd pkg
  for entry in "${APT_PACKAGES[@]}"; do
    cmd=${entry%%:*} pkg=${entry#*:}
    if [ "$cmd" = dpkg ]; then
      dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" && continue
    elif [[ $cmd == /* ]]; then
      [ -e "$cmd" ] && continue
    else
      command -v "$cmd" >/dev/null && continue
    fi
    missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  [ "$(id -u)" = 0 ] || { echo "error: installing packages needs root" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# failure_summary LOG: what each failing test printed, from a `go test -v` log, again at the end
# of the run. A failing test's own lines sit minutes up in a long run's output; a reader of only
# its tail (a CI excerpt) then still sees why it failed. At most 40 lines a test.
failure_summary() {
  local log=$1
  grep -qE '^\s*--- FAIL: ' "$log" || return 0
  echo "what the failing tests printed (full output: ${log#"$ROOT"/}):"
  awk '
    NR == FNR {
      if (match($0, /^ *--- FAIL: [^ ]+/)) { name = substr($0, RSTART, RLENGTH); sub(/^ *--- FAIL: /, "", name); failed[name] = 1 }
      next
    }
    /^=== (RUN|PAUSE|CONT|NAME) / { cur = $3; if (cur in failed) { printf "  %s\n", cur; shown = 0 }; next }
    /^ *--- (PASS|FAIL|SKIP): / { cur = ""; next }
    cur in failed && shown < 40 { print "  " $0; shown++ }
  ' "$log" "$log"
}
