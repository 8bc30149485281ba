#!/usr/bin/env bash
# Switches the local cluster's kube-proxy between its modes, so the data-plane reader
# (dataplane/proxyrules) and its end-to-end tests see the rules of each.
#
#   kube-proxy.sh mode                     prints the running kube-proxy's mode
#   kube-proxy.sh mode iptables|nftables   restarts kube-proxy in that mode
#
# A switch re-renders .local/etc/kube-proxy.yaml with the mode (the config up.sh renders, flags
# unchanged), restarts kube-proxy, waits for its healthz and for the `default/kubernetes` Service's
# rules of the new mode, and then makes sure the other mode's rules are gone: kube-proxy 1.37
# removes them itself at start, and this script removes what it left (the nftables table, or the
# KUBE-SVC/KUBE-SEP chains as down.sh does), so the node never balances through both.
source "$(dirname "$0")/lib.sh"

usage() { echo "usage: $0 mode [iptables|nftables]" >&2; exit 2; }
[ "${1:-}" = mode ] || usage
if [ $# = 1 ]; then
  kube_proxy_mode
  exit 0
fi
[ $# = 2 ] || usage
KUBE_PROXY_MODE=$2
check_kube_proxy_mode
[ "$(id -u)" = 0 ] || { echo "error: switching kube-proxy needs root" >&2; exit 1; }
[ -f "$ETC/kube-proxy.yaml" ] || { echo "error: the local cluster is not up (make cluster-up)" >&2; exit 1; }
lock_cluster

# iptables_rules / nftables_rules: the default/kubernetes Service's endpoint is programmed in that
# mode (iptables-nft's KUBE-SVC chain, or kube-proxy's own nftables table).
iptables_rules() { iptables-save -t nat 2>/dev/null | grep -q -- '--comment "default/kubernetes:https -> '; }
nftables_rules() { nft list table ip kube-proxy 2>/dev/null | grep -q 'chain service-.*-default/kubernetes/tcp/https'; }
# iptables_leftovers / nftables_leftovers: any rule of that mode's services is still there.
iptables_leftovers() { iptables-save -t nat 2>/dev/null | grep -q '^:KUBE-\(SVC\|SVL\|SEP\)-'; }
nftables_leftovers() { nft list table ip kube-proxy >/dev/null 2>&1 || nft list table ip6 kube-proxy >/dev/null 2>&1; }

step "kube-proxy stop"
stop kube-proxy 10
step "kube-proxy ($KUBE_PROXY_MODE)"
render kube-proxy.yaml "$ETC/kube-proxy.yaml"
start kube-proxy "$BIN/kube-proxy" --config="$ETC/kube-proxy.yaml" --v=2
wait_for kube-proxy 60 curl -sf "http://127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT/healthz"
step "$KUBE_PROXY_MODE rules written"
wait_for kube-proxy 60 "${KUBE_PROXY_MODE}_rules"

step "other mode's rules gone"
if [ "$KUBE_PROXY_MODE" = iptables ]; then
  if nftables_leftovers; then
    for fam in ip ip6; do nft delete table "$fam" kube-proxy 2>/dev/null || true; done
    printf '(removed the nftables table kube-proxy left) '
  fi
  ! nftables_leftovers || die kube-proxy "the nftables table kube-proxy is still there"
else
  if iptables_leftovers; then
    # As down.sh: kube-proxy --cleanup would remove the new mode's rules too, so flush and
    # delete the service chains of the old mode only (the jumps to them first).
    iptables -t nat -F KUBE-SERVICES 2>/dev/null || true
    for chain in $(iptables-save -t nat | sed -n 's/^:\(KUBE-\(SVC\|SVL\|SEP\|EXT\|FW\)-[A-Z0-9]*\).*/\1/p'); do
      iptables -t nat -F "$chain" || true
    done
    for chain in $(iptables-save -t nat | sed -n 's/^:\(KUBE-\(SVC\|SVL\|SEP\|EXT\|FW\)-[A-Z0-9]*\).*/\1/p'); do
      iptables -t nat -X "$chain" || true
    done
    printf '(removed the KUBE-SVC/SEP chains kube-proxy left) '
  fi
  ! iptables_leftovers || die kube-proxy "KUBE-SVC/SEP chains are still in the nat table"
fi
step_done
echo "kube-proxy: $(kube_proxy_mode) mode, healthz http://127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT/healthz"
