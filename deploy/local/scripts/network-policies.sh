#!/usr/bin/env bash
# Runs a real NetworkPolicy implementation beside the local cluster: kube-network-policies
# (v0.8.0, bin/kube-network-policies; make network-policies), on the host, for the real node only
# (KWOK nodes have no data path). The cluster must be up (make cluster-up). Needs root: it writes
# nftables and reads an nfqueue. docs/design/network-policies.md says what it exposes and when it
# enforces.
#
#   network-policies.sh start|stop|status
#
# start applies, server-side, upstream's RBAC unchanged (install.yaml: the ClusterRole and
# ClusterRoleBinding kube-network-policies, the ServiceAccount kube-system/kube-network-policies).
# The binary has no --kubeconfig: it takes rest.InClusterConfig() only, i.e. KUBERNETES_SERVICE_HOST
# and _PORT and a token and CA under /var/run/secrets/kubernetes.io/serviceaccount. So it runs in
# a private mount namespace whose /run is .local/etc/network-policies/run: that ServiceAccount's
# token (TokenRequest, 24 h), the cluster's CA, and the runtime's NRI socket directory bound in
# as upstream's DaemonSet mounts it (NETWORK_POLICIES_NRI=0 leaves it out: no NRI plugin).
# Flags as upstream's DaemonSet: --hostname-override (the real node), --nfqueue-id=98, and
# metrics on 127.0.0.1:$NETWORK_POLICIES_METRICS_PORT. NETWORK_POLICIES_V: klog verbosity
# (default 2; 4 logs NRI's Pod IPs, 2 each packet's verdict). PID network-policies; log
# .local/logs/network-policies.log.
#
# It enforces through an nftables `queue` expression: a kernel without CONFIG_NFT_QUEUE rejects
# its whole rule set ("syncing nftables rules ... no such file or directory") and it then enforces
# nothing. start checks that first and says so (it still starts: its informers, metrics and logs
# work).
#
# stop sends SIGINT (it cleans up its nftables table on SIGINT only; SIGTERM leaves it), deletes
# the table inet kube-network-policies if it is left, and removes the RBAC that start applied.
source "$(dirname "$0")/lib.sh"

NETWORK_POLICIES_VERSION=v0.8.0
NFT_TABLE=kube-network-policies
SA=kube-network-policies
np_etc=$ETC/network-policies

np_module() { (cd "$LOCAL/tools/network-policies" && go list -m -f '{{.Dir}}' sigs.k8s.io/kube-network-policies); }

# nft_queue_supported: whether the kernel takes an nftables `queue` expression (CONFIG_NFT_QUEUE),
# tried in a table of our own, without a hook, deleted at once.
nft_queue_supported() {
  local t=readyspan-queue-probe ok=0
  nft add table inet "$t" 2>/dev/null || return 1
  nft add chain inet "$t" c 2>/dev/null && nft add rule inet "$t" c queue num 98 bypass 2>/dev/null && ok=1
  nft delete table inet "$t" 2>/dev/null || true
  [ "$ok" = 1 ]
}

# rbac: upstream's install.yaml up to the DaemonSet (the RBAC documents), unchanged.
rbac() { awk '/^kind: DaemonSet/{exit} {print}' "$(np_module)/install.yaml" | sed '$d'; }

do_start() {
  [ "$(id -u)" = 0 ] || { echo "error: kube-network-policies needs root (nftables, nfqueue)" >&2; exit 1; }
  running kube-apiserver || { echo "error: the local cluster is not up (make cluster-up)" >&2; exit 1; }
  [ -x "$BIN/kube-network-policies" ] || { echo "error: bin/kube-network-policies is not built (make network-policies)" >&2; exit 1; }
  if running network-policies; then echo "kube-network-policies already running (pid $(pid_of network-policies))"; return 0; fi
  if (echo >"/dev/tcp/127.0.0.1/$NETWORK_POLICIES_METRICS_PORT") 2>/dev/null; then
    echo "error: 127.0.0.1:$NETWORK_POLICIES_METRICS_PORT is taken" >&2; exit 1
  fi
  if ! nft_queue_supported; then
    echo "warning: this kernel has no nftables queue expression (CONFIG_NFT_QUEUE): kube-network-policies" >&2
    echo "         cannot install its rules and will enforce no NetworkPolicy (it still watches and logs)" >&2
  fi
  [ -n "$(np_module)" ] || { echo "error: sigs.k8s.io/kube-network-policies is not in the module cache (make network-policies)" >&2; exit 1; }

  rbac | kubectl apply --server-side --force-conflicts -f - >/dev/null
  local sa_dir=$np_etc/run/secrets/kubernetes.io/serviceaccount
  mkdir -p "$sa_dir" "$np_etc/run/nri"
  kubectl -n kube-system create token "$SA" --duration 24h >"$sa_dir/token.tmp"
  mv "$sa_dir/token.tmp" "$sa_dir/token"
  cp "$PKI/ca.crt" "$sa_dir/ca.crt"
  echo kube-system >"$sa_dir/namespace"

  local nri=""
  if [ "${NETWORK_POLICIES_NRI:-1}" = 1 ] && [ -S /run/nri/nri.sock ]; then
    nri="mount --bind /run/nri '$np_etc/run/nri' && "
  fi
  # unshare execs sh, sh execs the binary: the PID file names kube-network-policies itself.
  start network-policies env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$APISERVER_PORT" \
    unshare --mount --propagation private -- sh -c "${nri}mount --rbind '$np_etc/run' /run && exec '$BIN/kube-network-policies' \
      --hostname-override='$NODE_NAME' --nfqueue-id=98 \
      --metrics-bind-address='127.0.0.1:$NETWORK_POLICIES_METRICS_PORT' --v='${NETWORK_POLICIES_V:-2}'"
  wait_for network-policies 30 curl -sf "http://127.0.0.1:$NETWORK_POLICIES_METRICS_PORT/metrics"
  echo "kube-network-policies $NETWORK_POLICIES_VERSION running (pid $(pid_of network-policies)), metrics :$NETWORK_POLICIES_METRICS_PORT"
}

do_stop() {
  local p
  p=$(pid_of network-policies)
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    # SIGINT: it waits 5 s ("grace period to cleanup resources") and deletes its table.
    kill -INT "$p" 2>/dev/null || true
    local i
    for ((i = 0; i < 60; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  fi
  stop network-policies 5
  nft delete table inet "$NFT_TABLE" 2>/dev/null || true
  if running kube-apiserver && [ -n "$(np_module)" ]; then
    rbac | kubectl delete --ignore-not-found -f - >/dev/null || true
  fi
  rm -rf "$np_etc"
  echo "kube-network-policies stopped"
}

case ${1:-} in
  start) do_start ;;
  stop) do_stop ;;
  status)
    if running network-policies; then
      tables=$(nft list tables 2>/dev/null | grep -c "inet $NFT_TABLE\$" || true)
      echo "kube-network-policies up (pid $(pid_of network-policies)), metrics :$NETWORK_POLICIES_METRICS_PORT; nftables table inet $NFT_TABLE: $([ "$tables" -gt 0 ] && echo present || echo absent)"
    else
      echo "kube-network-policies down"; exit 1
    fi ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
