#!/usr/bin/env bash
# Runs a real node autoscaler beside the local cluster: Karpenter with its KWOK provider (v1.15.0,
# bin/karpenter), on the host, and the kwok that plays the kubelet on the Nodes it creates. The
# cluster must be up (make cluster-up).
#
#   karpenter.sh start|stop|status
#
# start applies, server-side:
#   - Karpenter's CRDs from the module cache, as upstream's `make apply` does: NodePool, NodeClaim,
#     NodeOverlay, CapacityBuffer (kwok/charts/crds) and KWOKNodeClass (kwok/apis/crds);
#   - its chart's RBAC (kwok/charts: ClusterRoles karpenter and karpenter-core, the Roles in
#     kube-system and kube-node-lease, and their bindings to the ServiceAccount kube-system/karpenter),
#     rendered by bin/helm and unchanged; Karpenter authenticates with a client certificate of that
#     ServiceAccount's user name (pki.sh), so it has the chart's rights and no more;
#   - config/karpenter/nodepool.yaml: a KWOKNodeClass (nodeRegistrationDelay 5s) and a NodePool of
#     two small instance types, limited to 8 CPUs, consolidating 5 s after a Node's last Pod change.
# Then it starts kwok (PID karpenter-kwok) for the Nodes annotated kwok.x-k8s.io/node=fake, with
# the node stages of config/kwok/node-autoscaled.yaml and the Pod stages of config/kwok/pod-startup.yaml,
# and Karpenter (PID karpenter): no leader election, metrics and health on ports of lib.sh.
# Logs: .local/logs/karpenter.log, karpenter-kwok.log. KARPENTER_LOG_LEVEL: debug, info (default), error.
#
# stop deletes the NodePools first, so that Karpenter drains and deletes its Nodes and NodeClaims
# (they carry its finalizers), then stops both. make cluster-down stops them too.
source "$(dirname "$0")/lib.sh"

karpenter_module() { (cd "$LOCAL/tools/karpenter" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter); }

# nodeclaims: how many NodeClaims exist (0 when the CRD does not).
nodeclaims() {
  kubectl get nodeclaims.karpenter.sh -o name 2>/dev/null | wc -l
}

do_start() {
  running kube-apiserver || { echo "error: the local cluster is not up (make cluster-up)" >&2; exit 1; }
  local b
  for b in karpenter kwok helm; do
    [ -x "$BIN/$b" ] || { echo "error: bin/$b is not built (make cluster-build)" >&2; exit 1; }
  done
  if running karpenter; then echo "karpenter already running (pid $(pid_of karpenter))"; return 0; fi
  # Karpenter logs a port it cannot bind only as an error and runs on; a second one would go
  # unnoticed (its readyz answered by the first) and both would provision.
  local port
  for port in "$KARPENTER_METRICS_PORT" "$KARPENTER_HEALTH_PORT" "$KARPENTER_KWOK_PORT"; do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "error: 127.0.0.1:$port is taken (another karpenter or kwok?)" >&2
      exit 1
    fi
  done
  "$LOCAL/scripts/pki.sh"
  local mod
  mod=$(karpenter_module)
  [ -n "$mod" ] || { echo "error: sigs.k8s.io/karpenter is not in the module cache (make cluster-build)" >&2; exit 1; }

  kubectl apply --server-side --force-conflicts -f "$mod/kwok/charts/crds" -f "$mod/kwok/apis/crds" >/dev/null
  local crds=(crd/nodepools.karpenter.sh crd/nodeclaims.karpenter.sh crd/nodeoverlays.karpenter.sh
    crd/capacitybuffers.autoscaling.x-k8s.io crd/kwoknodeclasses.karpenter.kwok.sh)
  # kubectl wait fails at once on a CRD that has no conditions yet (just created): retry.
  for _ in $(seq 40); do kubectl wait --for condition=Established --timeout 30s "${crds[@]}" >/dev/null 2>&1 && break; sleep 0.5; done
  kubectl wait --for condition=Established --timeout 30s "${crds[@]}" >/dev/null
  "$BIN/helm" template karpenter "$mod/kwok/charts" --namespace kube-system \
    --show-only templates/clusterrole.yaml --show-only templates/clusterrole-kwok.yaml \
    --show-only templates/role.yaml --show-only templates/rolebinding.yaml |
    kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl apply --server-side --force-conflicts -f "$LOCAL/config/karpenter/nodepool.yaml" >/dev/null

  # Fake Pods' IPs come from --cidr (make scale uses 10.200/16, the e2e's kwok 10.201/16).
  start karpenter-kwok "$BIN/kwok" --kubeconfig "$KUBECONFIG_FILE" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --config "$LOCAL/config/kwok/kwok.yaml" --config "$LOCAL/config/kwok/node-autoscaled.yaml" \
    --config "$LOCAL/config/kwok/pod-startup.yaml" \
    --node-lease-duration-seconds 40 --cidr 10.202.0.0/16 --server-address "127.0.0.1:$KARPENTER_KWOK_PORT"
  wait_for karpenter-kwok 30 curl -sf "http://127.0.0.1:$KARPENTER_KWOK_PORT/healthz"

  # Karpenter parses its own flags and panics on any other (--kubeconfig included): the kubeconfig
  # comes from KUBECONFIG, every setting from its environment twin.
  start karpenter env KUBECONFIG="$ETC/karpenter.kubeconfig" DISABLE_LEADER_ELECTION=true \
    METRICS_PORT="$KARPENTER_METRICS_PORT" HEALTH_PROBE_PORT="$KARPENTER_HEALTH_PORT" \
    LOG_LEVEL="${KARPENTER_LOG_LEVEL:-info}" "$BIN/karpenter"
  wait_for karpenter 60 curl -sf "http://127.0.0.1:$KARPENTER_HEALTH_PORT/readyz"
  echo "karpenter running (pid $(pid_of karpenter)), kwok (pid $(pid_of karpenter-kwok)); NodePool default"
}

do_stop() {
  if running karpenter && running kube-apiserver; then
    kubectl delete nodepools.karpenter.sh --all --wait=false >/dev/null 2>&1 || true
    local deadline=$(($(date +%s) + 120))
    while [ "$(nodeclaims)" -gt 0 ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
    [ "$(nodeclaims)" -eq 0 ] || echo "warning: $(nodeclaims) NodeClaims left after 120s (their Nodes keep Karpenter's finalizer)" >&2
  fi
  stop karpenter 30
  stop karpenter-kwok 10
  echo "karpenter stopped"
}

case ${1:-} in
  start) do_start ;;
  stop) do_stop ;;
  status)
    if running karpenter; then
      echo "karpenter up (pid $(pid_of karpenter)), metrics :$KARPENTER_METRICS_PORT, health :$KARPENTER_HEALTH_PORT; $(nodeclaims) NodeClaims"
    else
      echo "karpenter down"; exit 1
    fi ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
