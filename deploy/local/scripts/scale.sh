#!/usr/bin/env bash
# The scale test bed (make scale, see docs/scale.md): brings the local cluster up (its real
# control plane; the real node stays as it is), stops what would only add noise (Jaeger,
# Prometheus, the everyday readyspan), starts KWOK managing the fake nodes (those annotated
# kwok.x-k8s.io/node=fake, with the kubelet-like stages in config/kwok/), then runs one load level
# with test/scale/scalerun: readyspan and the bare baseline side by side, the load driver, the
# report (table on stdout, JSON and per-Pod times in .local/scale/). Takes the cluster down again
# unless SCALE_KEEP_CLUSTER=1.
#
#   SCALE_NODES (50) SCALE_PODS (1000: Pods at the end) SCALE_RATE (20 Pod startups/s)
#   SCALE_ROLLS (1: rollouts of each Deployment; startups = Pods × (1 + rolls))
#   SCALE_REPLICAS (10) SCALE_DEADLINE (8m: bound on the load phase)
#   SCALE_SHARDS (1: readyspan processes splitting the cluster, --shard/--total-shards)
#   SCALE_ENCODING (protobuf: readyspan's --watch-encoding, protobuf or json)
#   SCALE_BASELINE_ENCODING (protobuf: the baseline's, protobuf or json)
#   SCALE_JSON_BASELINE (1: a second baseline over JSON beside the first, as a user of its own;
#     0 for none; needs SCALE_BASELINE_ENCODING=protobuf)
#   SCALE_COLLECTOR (0: 1 puts Jaeger v2, an OpenTelemetry Collector, between readyspan and the
#     receiver, with deploy/local/config/collector-scale.yaml)
#   SCALE_OTLP_RECEIVE (0: 1 turns the apiserver's tracing on, every request sampled, and sends
#     its spans to readyspan's --otlp-receive on 127.0.0.1:4322, which joins them into the traces;
#     the load then waits 150 s after the sync, so the apiserver's exporter, which found nothing
#     listening before readyspan started, is past its gRPC reconnect backoff, up to 2 minutes)
#   SCALE_ARGS: more scalerun flags
source "$(dirname "$0")/lib.sh"

nodes=${SCALE_NODES:-50}
pods=${SCALE_PODS:-1000}
rate=${SCALE_RATE:-20}
rolls=${SCALE_ROLLS:-1}
replicas=${SCALE_REPLICAS:-10}
deadline=${SCALE_DEADLINE:-8m}
shards=${SCALE_SHARDS:-1}
collector=()
if [ "${SCALE_COLLECTOR:-0}" = 1 ]; then
  collector=(--collector "$BIN/jaeger" --collector-config "$LOCAL/config/collector-scale.yaml")
fi
encodings=(--readyspan-encoding "${SCALE_ENCODING:-protobuf}" --baseline-encoding "${SCALE_BASELINE_ENCODING:-protobuf}")
if [ "${SCALE_JSON_BASELINE:-1}" = 1 ]; then
  encodings+=(--json-baseline)
fi
out=$STATE/scale
apiserver_tracing=--tracing-config-file=
receive=()
if [ "${SCALE_OTLP_RECEIVE:-0}" = 1 ]; then
  receive_addr=127.0.0.1:4322
  apiserver_tracing=--tracing-config-file=$out/apiserver-tracing.yaml
  receive=(--readyspan-args "--otlp-receive $receive_addr" --idle 150s)
fi

lock_cluster
if running kube-apiserver; then
  echo "error: the local cluster is up; make scale measures on a cluster of its own: make cluster-down first" >&2
  exit 1
fi
[ -x "$BIN/readyspan" ] || { echo "error: bin/readyspan is not built (make build)" >&2; exit 1; }
SKIP_PACKAGES=1 "$LOCAL/scripts/build.sh" kwok
(cd "$ROOT" && go build -o "$BIN/scale-baseline" ./test/scale/baseline && go build -o "$BIN/scalerun" ./test/scale/scalerun)
mkdir -p "$out"
if [ "${SCALE_OTLP_RECEIVE:-0}" = 1 ]; then
  cat >"$out/apiserver-tracing.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: $receive_addr
samplingRatePerMillion: 1000000
EOF
fi

# shellcheck disable=SC2317 # finish runs from the EXIT trap
finish() {
  local rc=$?
  stop kwok 10 || true
  if [ "${SCALE_KEEP_CLUSTER:-0}" != 1 ]; then "$LOCAL/scripts/down.sh" || true; fi
  exit "$rc"
}
trap finish EXIT

# The controller-manager's client makes the Pods and their events: its default 20 QPS would cap
# the test bed at about 10 Pods/s, so it gets what large clusters give it. The apiserver neither
# traces every request (the local cluster's setting, for the demo; SCALE_OTLP_RECEIVE=1 sends
# them to readyspan) nor writes the audit log (readyspan does not read it here): on two cores both
# take CPU the load needs. A later flag wins, so these empty values turn both off.
# etcd does not fsync: its data is thrown away after the run.
ETCD_ARGS="--unsafe-no-fsync" APISERVER_ARGS="$apiserver_tracing --audit-policy-file=" \
  KCM_ARGS="--kube-api-qps=300 --kube-api-burst=600" "$LOCAL/scripts/up.sh"
"$LOCAL/scripts/readyspan.sh" stop >/dev/null
stop jaeger 15
stop prometheus 15

log "kwok: managing the nodes annotated kwok.x-k8s.io/node=fake"
# Fake Pods' IPs come from --cidr: they are only values in the API, nothing routes them.
start kwok "$BIN/kwok" --kubeconfig "$KUBECONFIG_FILE" \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --config "$LOCAL/config/kwok/kwok.yaml" --config "$LOCAL/config/kwok/node-initialize.yaml" \
  --config "$LOCAL/config/kwok/node-heartbeat-with-lease.yaml" \
  --config "$LOCAL/config/kwok/pod-startup.yaml" \
  --node-lease-duration-seconds 40 --cidr 10.200.0.0/16 --server-address 127.0.0.1:10247
wait_for kwok 30 curl -sf http://127.0.0.1:10247/healthz

# shellcheck disable=SC2086 # SCALE_ARGS is words
"$BIN/scalerun" --kubeconfig "$KUBECONFIG_FILE" --readyspan "$BIN/readyspan" --baseline "$BIN/scale-baseline" \
  --out "$out" --nodes "$nodes" --pods "$pods" --rate "$rate" --rolls "$rolls" --replicas "$replicas" \
  --deadline "$deadline" --shards "$shards" "${encodings[@]}" "${collector[@]}" "${receive[@]}" ${SCALE_ARGS:-}
