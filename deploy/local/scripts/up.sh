#!/usr/bin/env bash
# Brings up the local cluster (make cluster-up): a real single-node Kubernetes v1.37 cluster on this
# host, with no Docker: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the image
# registry, containerd and the kubelet (in a private mount namespace), kube-proxy, then Jaeger,
# Prometheus and `readyspan run`. State under .local/, one log per component in .local/logs/.
# Tear down with down.sh. Needs root, cgroup v1, the binaries from build.sh.
#
# Environment: READYSPAN_ARGS  extra flags for `readyspan run` (see readyspan.sh)
#              COLD_BLOB_DELAY per-blob delay of the registry's cold images (default 2s)
#              ETCD_ARGS, APISERVER_ARGS, KCM_ARGS, SCHEDULER_ARGS  extra flags for etcd,
#                              kube-apiserver, kube-controller-manager and kube-scheduler
#                              (make scale uses them)
#              WEBHOOK_ARGS    extra flags for the admission webhook server (localwebhook)
#              KUBELET_VERSION the node's kubelet: 1.34, 1.35, 1.36 or 1.37 (default; see lib.sh)
#              CONTAINERD_VERSION  the node's runtime: 2 (default), 1.7 or 1.6 (Debian's)
#              KUBE_PROXY_MODE kube-proxy's mode: iptables (default) or nftables (kube-proxy.sh
#                              switches it later)
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "error: the local cluster needs root (network, cgroups, mounts)" >&2; exit 1; }
if [ ! -d /sys/fs/cgroup/cpu ] || [ ! -d /sys/fs/cgroup/pids ]; then
  echo "error: the local cluster needs cgroup v1 hierarchies under /sys/fs/cgroup" >&2
  exit 1
fi

lock_cluster
check_kube_proxy_mode

kubelet_bin=$(kubelet_binary)
components=(etcd kube-apiserver kube-controller-manager kube-scheduler "$(basename "$kubelet_bin")" kube-proxy
  kubectl localregistry pause localwebhook jaeger prometheus)
case $CONTAINERD_VERSION in
  2) components+=(containerd containerd-shim-runc-v2) ;;
  1.7) components+=(containerd-1.7 containerd-shim-runc-v2-1.7) ;;
  1.6) ;;
  *) echo "error: CONTAINERD_VERSION=$CONTAINERD_VERSION is not one of 2, 1.7, 1.6" >&2; exit 1 ;;
esac
missing=()
for c in "${components[@]}"; do [ -x "$BIN/$c" ] || missing+=("$c"); done
[ ${#missing[@]} -eq 0 ] || { echo "error: not built: ${missing[*]} (run make cluster-build, or deploy/local/scripts/build.sh ${missing[*]})" >&2; exit 1; }

if running kube-apiserver; then
  if "$LOCAL/scripts/status.sh" --check >/dev/null 2>&1; then
    log "the local cluster is already up:"
    exec "$LOCAL/scripts/status.sh"
  fi
  echo "error: the local cluster is partly up; run make cluster-down first" >&2
  "$LOCAL/scripts/status.sh" >&2 || true
  exit 1
fi
ensure_packages

# Keep the previous run's logs for a look after a failure.
if [ -n "$(ls -A "$LOGS" 2>/dev/null)" ]; then
  rm -rf "$STATE/logs.previous" && mv "$LOGS" "$STATE/logs.previous" && mkdir -p "$LOGS"
fi
log "local cluster: bringing it up (state in ${STATE#"$ROOT"/}/, logs in ${LOGS#"$ROOT"/}/)"

# ---- host state we will restore -------------------------------------------------------------
[ -f "$RUN/ip_forward.orig" ] || cat /proc/sys/net/ipv4/ip_forward >"$RUN/ip_forward.orig"
[ -f "$RUN/nft-tables.before" ] || { nft list tables 2>/dev/null || true; } >"$RUN/nft-tables.before"
[ -d /run/containerd ] || { mkdir -p /run/containerd && touch "$RUN/run-containerd.created"; }
[ -f "$RUN/shim-sockets.before" ] || { ls /run/containerd/s 2>/dev/null || true; } >"$RUN/shim-sockets.before"

step "pki and configuration"
"$LOCAL/scripts/pki.sh"
render kubelet.yaml "$ETC/kubelet.yaml"
render kube-proxy.yaml "$ETC/kube-proxy.yaml"
render cni.conflist "$ETC/cni/10-readyspan-local.conflist"
render registry-hosts.toml "$ETC/containerd/certs.d/$REGISTRY/hosts.toml"
render audit-policy.yaml "$ETC/audit-policy.yaml"
render apiserver-tracing.yaml "$ETC/apiserver-tracing.yaml"
render jaeger.yaml "$ETC/jaeger.yaml"
render prometheus.yml "$ETC/prometheus.yml"
case $CONTAINERD_VERSION in
  2) containerd_bin=$BIN/containerd
     render containerd.toml "$ETC/containerd.toml" ;;
  1.7) containerd_bin=$BIN/containerd-1.7
     render containerd-1.7.toml "$ETC/containerd.toml" ;;
  1.6) # Debian's 1.6 works with kubelet 1.37 (not 1.38)
     containerd_bin=$(command -v containerd)
     render containerd-1.6.toml "$ETC/containerd.toml" ;;
esac

step "pod network ($BRIDGE)"
# Made before any Pod so the apiserver relay, the kubelet and Jaeger can listen on the node
# address; the CNI bridge plugin adopts it. down.sh deletes it.
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
  touch "$RUN/bridge.created"
fi
ip -4 addr show dev "$BRIDGE" | grep -q "inet $NODE_IP/" || ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up

step "cgroups (/$CGROUP_ROOT)"
for h in /sys/fs/cgroup/*/; do
  h=${h%/}
  [ -L "$h" ] && continue                       # cpu,cpuacct aliases
  [ -f "$h/cgroup.procs" ] || continue
  [ -d "$h/$CGROUP_ROOT" ] && continue
  mkdir "$h/$CGROUP_ROOT" && echo "$h/$CGROUP_ROOT" >>"$RUN/cgroups.created"
  if [ -f "$h/cpuset.cpus" ]; then
    cat "$h/cpuset.cpus" >"$h/$CGROUP_ROOT/cpuset.cpus"
    cat "$h/cpuset.mems" >"$h/$CGROUP_ROOT/cpuset.mems"
  fi
done

step "registry ($REGISTRY)"
images=$STATE/images
if [ ! -f "$images/busybox.tar" ] || [ ! -f "$images/pause.tar" ] || [ "$BIN/pause" -nt "$images/pause.tar" ]; then
  "$BIN/localregistry" images --out "$images" --busybox /bin/busybox --pause "$BIN/pause" \
    --registry "$REGISTRY" >"$LOGS/images.log" 2>&1 || die images "building the test images failed"
fi
start registry "$BIN/localregistry" serve --addr "$REGISTRY" \
  --load "readyspan/busybox:v1=$images/busybox.tar" --load "readyspan/pause:v1=$images/pause.tar" \
  --cold-repo "$COLD_REPO" --delay-repo "$COLD_REPO" --blob-delay "$COLD_BLOB_DELAY"
wait_for registry 20 curl -sf "http://$REGISTRY/v2/readyspan/pause/manifests/v1" -o /dev/null \
  -H 'Accept: application/vnd.docker.distribution.manifest.v2+json'

step "etcd"
mkdir -p "$STATE/etcd" && chmod 700 "$STATE/etcd"
# shellcheck disable=SC2086 # ETCD_ARGS is words
start etcd "$BIN/etcd" --name "$NODE_NAME" --data-dir "$STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster "$NODE_NAME=http://127.0.0.1:$((ETCD_PORT + 1))" \
  --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 2))" ${ETCD_ARGS:-}
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

step "kube-apiserver"
# shellcheck disable=SC2086 # APISERVER_ARGS is words
# It binds loopback but advertises the node address, where the relay below forwards to it, so
# the `kubernetes` Service (10.96.0.1) works from Pods through kube-proxy.
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
  --advertise-address="$NODE_IP" --endpoint-reconciler-type=lease \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP,Hostname \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --audit-policy-file="$ETC/audit-policy.yaml" --audit-log-path="$LOGS/audit.log" \
  --audit-log-maxsize=100 --audit-log-maxbackup=1 \
  --tracing-config-file="$ETC/apiserver-tracing.yaml" \
  --allow-privileged=true --profiling=false --v=2 ${APISERVER_ARGS:-}
wait_for kube-apiserver 90 api /readyz

step "admission webhook ($WEBHOOK)"
# A real webhook server on the host, registered by URL: only Pods labelled readyspan.dev/inject
# or readyspan.dev/deny are sent to it (the configurations' objectSelectors). WEBHOOK_ARGS: its
# delays (--inject-delay, --deny-delay).
# shellcheck disable=SC2086 # WEBHOOK_ARGS is words
start webhook "$BIN/localwebhook" --addr "$WEBHOOK" --cert "$PKI/webhook.crt" --key "$PKI/webhook.key" \
  --sidecar-image "$BUSYBOX_IMAGE" ${WEBHOOK_ARGS:-}
wait_for webhook 10 curl -sf --max-time 2 --cacert "$PKI/ca.crt" "https://$WEBHOOK/healthz"
render webhooks.yaml "$ETC/webhooks.yaml"
sed -i "s|@CA_BUNDLE@|$(base64 -w0 "$PKI/ca.crt")|" "$ETC/webhooks.yaml"
wait_for kube-apiserver 30 kubectl apply -f "$ETC/webhooks.yaml"

step "apiserver relay ($NODE_IP:$APISERVER_PORT)"
start apiserver-relay socat "TCP-LISTEN:$APISERVER_PORT,bind=$NODE_IP,reuseaddr,fork" "TCP:127.0.0.1:$APISERVER_PORT"
wait_for apiserver-relay 10 curl -sf --max-time 2 --cacert "$PKI/ca.crt" "https://$NODE_IP:$APISERVER_PORT/livez"

step "kube-controller-manager"
# shellcheck disable=SC2086 # KCM_ARGS is words
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig="$ETC/kube-controller-manager.kubeconfig" \
  --authentication-kubeconfig="$ETC/kube-controller-manager.kubeconfig" \
  --authorization-kubeconfig="$ETC/kube-controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --use-service-account-credentials=true --controllers='*,-nodeipam' \
  --service-cluster-ip-range="$SERVICE_CIDR" --v=2 ${KCM_ARGS:-}
wait_for kube-controller-manager 60 curl -sfk "https://127.0.0.1:$KCM_PORT/healthz"

step "kube-scheduler"
# shellcheck disable=SC2086 # SCHEDULER_ARGS is words
start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$ETC/kube-scheduler.kubeconfig" \
  --authentication-kubeconfig="$ETC/kube-scheduler.kubeconfig" \
  --authorization-kubeconfig="$ETC/kube-scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --leader-elect=false --v=2 ${SCHEDULER_ARGS:-}
wait_for kube-scheduler 60 curl -sfk "https://127.0.0.1:$SCHEDULER_PORT/healthz"

step "node mount namespace"
# containerd and the kubelet share a private mount namespace (slave propagation): their mounts
# never reach the host, and the kernel tunables the kubelet wants to set are plain files there.
sysctls=$STATE/node-sysctl
mkdir -p "$sysctls"
echo 1 >"$sysctls/overcommit_memory"
echo 10 >"$sysctls/panic"
echo 1 >"$sysctls/panic_on_oops"
start node-namespace unshare --mount --propagation slave -- sleep infinity
holder=$(pid_of node-namespace)
# A function, so wait_for re-reads both namespaces on every try: written inline as
# test "$(readlink …)" != "$(readlink …)", the substitutions would run once, before the wait, and a
# holder that had not yet switched namespaces would never be seen to.
in_own_mount_namespace() { [ "$(readlink "/proc/$1/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]; }
wait_for node-namespace 5 in_own_mount_namespace "$holder"
nsenter -t "$holder" -m -- sh -c "
  mount --bind '$sysctls/overcommit_memory' /proc/sys/vm/overcommit_memory &&
  mount --bind '$sysctls/panic' /proc/sys/kernel/panic &&
  mount --bind '$sysctls/panic_on_oops' /proc/sys/kernel/panic_on_oops" >>"$LOGS/node-namespace.log" 2>&1 ||
  die node-namespace "bind-mounting the kubelet's sysctl files failed"

step "containerd"
mkdir -p "$STATE/containerd"
# containerd's own spans (its CRI server's gRPC calls, beneath the kubelet's, by the trace context
# the kubelet propagates) go where the apiserver's and kubelet's go; containerd v2 configures its
# tracing from the OTEL_* environment only.
start containerd env OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$COMPONENTS_OTLP_PORT" \
  OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_SERVICE_NAME=containerd \
  nsenter -t "$holder" -m -- "$containerd_bin" --config "$ETC/containerd.toml"
ctr=(ctr --address "$RUN/containerd.sock" --namespace k8s.io)
wait_for containerd 30 "${ctr[@]}" version
# Pre-pull the base images so the Pods' pulls of them are warm ("already present").
for img in "$PAUSE_IMAGE" "$BUSYBOX_IMAGE"; do
  "${ctr[@]}" images pull --plain-http "$img" >>"$LOGS/containerd.log" 2>&1 ||
    die containerd "pre-pulling $img failed"
done

step "kubelet $KUBELET_VERSION"
start kubelet nsenter -t "$holder" -m -- "$kubelet_bin" --config="$ETC/kubelet.yaml" \
  --kubeconfig="$ETC/kubelet.kubeconfig" --root-dir="$STATE/kubelet" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=2
wait_for kubelet 60 curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"

step "kube-proxy ($KUBE_PROXY_MODE)"
start kube-proxy "$BIN/kube-proxy" --config="$ETC/kube-proxy.yaml" --v=2
wait_for kube-proxy 60 curl -sf "http://127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT/healthz"

step "node Ready"
node_ready() {
  [ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
wait_for kubelet 120 node_ready
running_kubelet=$(node_kubelet_minor)
[ "$running_kubelet" = "$KUBELET_VERSION" ] ||
  die kubelet "the node reports kubelet ${running_kubelet:-unknown}, want $KUBELET_VERSION ($kubelet_bin)"
wait_for kube-controller-manager 60 kubectl get serviceaccount default -n default
node_ready_at=$(elapsed "$T0")

step "jaeger (query $JAEGER_QUERY)"
start jaeger "$BIN/jaeger" --config "$ETC/jaeger.yaml"
wait_for jaeger 60 curl -sf "http://$JAEGER_QUERY/api/services"

step "prometheus ($PROMETHEUS)"
mkdir -p "$STATE/prometheus/data" "$STATE/prometheus/rules.d"
start prometheus "$BIN/prometheus" --config.file="$ETC/prometheus.yml" \
  --storage.tsdb.path="$STATE/prometheus/data" --web.listen-address="$PROMETHEUS" \
  --web.enable-lifecycle
wait_for prometheus 60 curl -sf "http://$PROMETHEUS/-/ready"

step "readyspan ($READYSPAN_METRICS)"
if [ -x "$BIN/readyspan" ]; then
  "$LOCAL/scripts/readyspan.sh" start >/dev/null
else
  step_skip "bin/readyspan is not built yet (make build)"
fi
step_done

log "local cluster up (kubelet $KUBELET_VERSION, containerd $CONTAINERD_VERSION): node Ready after ${node_ready_at}s, everything healthy after $(elapsed "$T0")s"
log "  export KUBECONFIG=${KUBECONFIG_FILE#"$ROOT"/}   # or: bin/kubectl --kubeconfig .local/kubeconfig get pods -A"
log "  Jaeger API http://$JAEGER_QUERY/api/services   Prometheus http://$PROMETHEUS   readyspan http://$READYSPAN_METRICS/metrics"
log "  readyspan's UI (recent rollouts, Gantt charts, Pod waterfalls) http://$READYSPAN_METRICS/"
