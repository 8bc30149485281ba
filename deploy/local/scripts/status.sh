#!/usr/bin/env bash
# Lists each component of the local cluster: up or down, its PID and its address.
# With --check it exits 0 only when every component is up (readyspan counts only when
# bin/readyspan exists); the other scripts use that to decide whether to bring the cluster up.
source "$(dirname "$0")/lib.sh"
check=0
[ "${1:-}" = --check ] && check=1

rows=(
  "registry|http://$REGISTRY/v2/"
  "etcd|http://127.0.0.1:$ETCD_PORT"
  "kube-apiserver|https://127.0.0.1:$APISERVER_PORT"
  "apiserver-relay|$NODE_IP:$APISERVER_PORT -> 127.0.0.1:$APISERVER_PORT"
  "kube-controller-manager|https://127.0.0.1:$KCM_PORT"
  "kube-scheduler|https://127.0.0.1:$SCHEDULER_PORT"
  "webhook|https://$WEBHOOK (admission: readyspan.dev/inject, readyspan.dev/deny)"
  "node-namespace|private mount namespace of containerd and the kubelet"
  "containerd|unix://${RUN#"$ROOT"/}/containerd.sock"
  "kubelet|https://$NODE_IP:$KUBELET_PORT (node $NODE_NAME)"
  "kube-proxy|$(kube_proxy_mode) mode, healthz 127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT"
  "jaeger|query http://$JAEGER_QUERY, OTLP 127.0.0.1|$NODE_IP:$JAEGER_OTLP_GRPC_PORT (grpc) :$JAEGER_OTLP_HTTP_PORT (http)"
  "prometheus|http://$PROMETHEUS"
  "readyspan|http://$READYSPAN_METRICS/metrics"
)
all_up=0
printf '%-24s %-5s %-8s %s\n' COMPONENT STATE PID ADDRESS
for row in "${rows[@]}"; do
  name=${row%%|*} addr=${row#*|}
  if running "$name"; then
    printf '%-24s %-5s %-8s %s\n' "$name" up "$(pid_of "$name")" "$addr"
  else
    printf '%-24s %-5s %-8s %s\n' "$name" down - "$addr"
    if [ "$name" != readyspan ] || [ -x "$BIN/readyspan" ]; then all_up=1; fi
  fi
done
if running kube-apiserver && [ -x "$BIN/kubectl" ]; then
  ready=$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
  echo "node $NODE_NAME Ready=${ready:-unknown}; kubeconfig ${KUBECONFIG_FILE#"$ROOT"/}"
fi
if [ "$check" = 1 ]; then exit "$all_up"; fi
[ "$all_up" = 0 ] || echo "(not all up: make cluster-up, or make cluster-down first if it is partly up)"
