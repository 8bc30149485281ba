#!/usr/bin/env bash
# otlp-attack.sh: every attack of test/otlpattack against a bin/readyspan run whose OTLP input
# has the Helm chart's settings (--otlp-receive-max-mib 32, --otlp-receive-inflight-mib 32,
# GOMEMLIMIT at the chart's 256 MiB limit), on loopback and with no cluster behind it (the
# input works while the apiserver is unreachable): prints the peak RSS, the held bytes and the
# heap after each attack. Needs nothing but Go; make otlp-attack builds what it runs.
set -euo pipefail
BIN=${BIN:-$(cd "$(dirname "$0")/../../.." && pwd)/bin}
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cat >"$work/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
KC
port=${OTLP_ATTACK_PORT:-14321}
metrics=${OTLP_ATTACK_METRICS_PORT:-18081}
GOMEMLIMIT=256MiB "$BIN/readyspan" run --kubeconfig "$work/kubeconfig" --metrics-addr "127.0.0.1:$metrics" \
  --otlp-receive "127.0.0.1:$port" --otlp-receive-max-mib 32 --otlp-receive-inflight-mib 32 \
  --otlp-endpoint 127.0.0.1:1 --otlp-insecure >"$work/readyspan.log" 2>&1 &
pid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$metrics/healthz" >/dev/null && break; sleep 0.2; done
"$BIN/otlpattack" -url "http://127.0.0.1:$port" -pid "$pid" -metrics "http://127.0.0.1:$metrics/metrics"
