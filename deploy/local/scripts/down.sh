#!/usr/bin/env bash
# Tears down the local cluster (make cluster-down): stops exactly the processes up.sh started
# (by their PID files; containers and shims by the cgroups and the mount namespace the cluster
# made), removes kube-proxy's rules, the bridge and the cgroups, restores net.ipv4.ip_forward and
# deletes the cluster's data. The PKI, the built images and the last logs stay in .local/.
# Safe to run when the cluster is down or only partly up.
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "error: tearing down the local cluster needs root" >&2; exit 1; }
lock_cluster
log "local cluster: tearing it down"

step "readyspan, prometheus, captures"
stop readyspan 15
stop readyspan-node 10
stop prometheus 15
# What an interrupted capture-rollout.sh or capture-karpenter.sh, or karpenter.sh, may have left
# running (the cluster's data goes, so Karpenter need not clean up its Nodes).
stop capture-record 10
for f in "$RUN"/capture-*-watch.pid; do
  [ -e "$f" ] || continue
  f=${f##*/}
  stop "${f%.pid}" 5
done
stop rollouts-controller 10
stop karpenter 10
stop karpenter-kwok 10
# kube-network-policies (network-policies.sh): SIGINT, on which it deletes its nftables table.
if running network-policies; then kill -INT "$(pid_of network-policies)" 2>/dev/null || true; sleep 6; fi
stop network-policies 5
nft delete table inet kube-network-policies 2>/dev/null || true

step "kube-proxy and its rules"
stop kube-proxy 10
stop apiserver-relay 5
if [ -x "$BIN/kube-proxy" ] && [ -f "$RUN/nft-tables.before" ]; then
  "$BIN/kube-proxy" --cleanup --v=2 >>"$LOGS/kube-proxy-cleanup.log" 2>&1 || true
fi
# `kube-proxy --cleanup` leaves KUBE-* chains (KUBE-FIREWALL, the kubelet's canaries): remove the
# rules that jump to them from built-in chains, then flush and delete them. Only tables that exist
# are read: reading a legacy table that does not exist creates it.
sweep_kube_chains() { # SAVE-CMD CMD TABLE...
  local save=$1 cmd=$2 table rule chain; shift 2
  for table in "$@"; do
    "$save" -t "$table" 2>/dev/null | grep -q -- "-j KUBE-\|^:KUBE-" || continue
    "$save" -t "$table" | grep -E '^-A [A-Z]+ .*-j KUBE-' | grep -v '^-A KUBE-' | sed 's/^-A /-D /' |
      while read -r rule; do eval "$cmd -t $table $rule" || true; done
    for chain in $("$save" -t "$table" | sed -n 's/^:\(KUBE-[A-Za-z0-9-]*\).*/\1/p'); do "$cmd" -t "$table" -F "$chain" || true; done
    for chain in $("$save" -t "$table" | sed -n 's/^:\(KUBE-[A-Za-z0-9-]*\).*/\1/p'); do "$cmd" -t "$table" -X "$chain" || true; done
  done
}
if [ -f "$RUN/nft-tables.before" ]; then
  sweep_kube_chains iptables-save iptables filter nat mangle raw
  sweep_kube_chains ip6tables-save ip6tables filter nat mangle raw
  # shellcheck disable=SC2046
  sweep_kube_chains iptables-legacy-save iptables-legacy $(cat /proc/net/ip_tables_names 2>/dev/null)
  # shellcheck disable=SC2046
  sweep_kube_chains ip6tables-legacy-save ip6tables-legacy $(cat /proc/net/ip6_tables_names 2>/dev/null)
  if command -v nft >/dev/null; then
    for fam in ip ip6; do nft delete table "$fam" kube-proxy 2>/dev/null || true; done
    # iptables-nft tables that did not exist before up.sh and hold no rule now.
    nft list tables 2>/dev/null | while read -r _ fam table; do
      grep -qx "table $fam $table" "$RUN/nft-tables.before" && continue
      case $table in filter | nat | mangle | raw) ;; *) continue ;; esac
      nft -a list table "$fam" "$table" | grep -qP '^\t\t.*# handle' || nft delete table "$fam" "$table" || true
    done
  fi
  rm -f "$RUN/nft-tables.before"
fi

step "kubelet and containers"
stop kubelet 15
# Every container of every Pod runs in the kubelet's cgroup tree: kill them all (the kubelet is
# stopped, so nothing restarts them).
cgroup_procs() {
  local h
  for h in /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
    [ -d "$h" ] && find "$h" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u
}
for _ in 1 2 3 4 5 6 7 8 9 10; do
  pids=$(cgroup_procs)
  [ -z "$pids" ] && break
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null || true
  sleep 0.3
done

step "containerd and shims"
holder=$(pid_of node-namespace)
node_ns=""
if [ -n "$holder" ] && kill -0 "$holder" 2>/dev/null; then
  node_ns=$(readlink "/proc/$holder/ns/mnt")
fi
stop containerd 15
# The shims are the processes left in the node's mount namespace besides its holder.
ns_procs() {
  [ -n "$node_ns" ] || return 0
  local d
  for d in /proc/[0-9]*; do
    [ "$(readlink "$d/ns/mnt" 2>/dev/null)" = "$node_ns" ] && [ "${d#/proc/}" != "$holder" ] && echo "${d#/proc/}"
  done
  return 0
}
for sig in TERM TERM KILL KILL; do
  pids=$(ns_procs)
  [ -z "$pids" ] && break
  # shellcheck disable=SC2086
  kill -s "$sig" $pids 2>/dev/null || true
  sleep 0.5
done
stop node-namespace 5
if [ -f "$RUN/shim-sockets.before" ]; then
  for s in /run/containerd/s/*; do
    [ -e "$s" ] || continue
    grep -qxF "$(basename "$s")" "$RUN/shim-sockets.before" || rm -f "$s"
  done
  rm -f "$RUN/shim-sockets.before"
fi
if [ -f "$RUN/run-containerd.created" ]; then # the shims' socket directory, if up.sh made it
  rmdir /run/containerd/s /run/containerd 2>/dev/null || true
  rm -f "$RUN/run-containerd.created"
fi

step "control plane, webhook, registry, jaeger"
stop kube-scheduler 10
stop kube-controller-manager 10
stop kube-apiserver 15
stop webhook 5
stop etcd 10
stop registry 5
# Last: the apiserver flushes its spans to Jaeger on the way out (and waits when it is gone).
stop jaeger 10

step "cgroups, bridge, ip_forward"
if [ -f "$RUN/cgroups.created" ]; then
  while read -r dir; do
    [ -d "$dir" ] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
    [ -d "$dir" ] && log "  warning: could not remove $dir"
  done <"$RUN/cgroups.created"
  rm -f "$RUN/cgroups.created"
fi
# The Pods' veths: their network namespaces die with the last process and socket in them, but a
# killed container's orphaned TCP sockets can keep one (and its veth) alive for minutes.
for veth in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
  ip link del "$veth" 2>/dev/null || true
done
if [ -f "$RUN/bridge.created" ]; then
  ip link del "$BRIDGE" 2>/dev/null || true
  rm -f "$RUN/bridge.created"
fi
if [ -f "$RUN/ip_forward.orig" ]; then
  cat "$RUN/ip_forward.orig" >/proc/sys/net/ipv4/ip_forward
  rm -f "$RUN/ip_forward.orig"
fi

step "cluster data"
# The mounts under these directories lived only in the node's mount namespace, gone with it.
rm -rf "$STATE/etcd" "$STATE/containerd" "$STATE/kubelet" "$STATE/cni-ipam" "$STATE/prometheus" \
  "$STATE/runc" "$STATE/node-sysctl" || die down "could not delete the cluster's data (still mounted?)"
# readyspan's state file describes this cluster's Pods, gone now.
rm -f "$RUN"/*.sock "$RUN"/*.sock.ttrpc "$RUN/readyspan.args" "$RUN/readyspan.state"
step_done

left=$(ls "$RUN"/*.pid 2>/dev/null || true)
[ -z "$left" ] || log "warning: PID files left: $left"
log "local cluster down after $(elapsed "$T0")s"
