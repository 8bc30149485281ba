#!/usr/bin/env bash
# The end-to-end tests (make e2e): brings the local cluster up when it is not (and takes it down
# again afterwards, unless E2E_KEEP_CLUSTER=1), runs the local readyspan with the tests' settings,
# then `go test -tags e2e ./test/e2e/`. Extra arguments go to go test (e.g. -run TestColdPull -v).
# KUBELET_VERSION=1.34 (1.35, 1.36) runs the suite against a node with that kubelet (lib.sh).
source "$(dirname "$0")/lib.sh"

lock_cluster
started=0
if ! "$LOCAL/scripts/status.sh" --check >/dev/null 2>&1; then
  "$LOCAL/scripts/up.sh"
  started=1
fi
# KUBELET_VERSION (lib.sh) names the node the suite runs against; a cluster already up with
# another kubelet would run it against the wrong one.
if [ "$(node_kubelet_minor)" != "$KUBELET_VERSION" ]; then
  echo "error: the local cluster's node runs kubelet $(node_kubelet_minor), not KUBELET_VERSION=$KUBELET_VERSION; make cluster-down first" >&2
  exit 1
fi
# shellcheck disable=SC2317 # finish runs from the EXIT trap
finish() {
  local rc=$?
  # The witness first (down.sh warns of every process it finds left), then back to the everyday
  # settings, or down if this script brought the cluster up.
  stop otlpcapture || true
  if [ "$started" = 1 ] && [ "${E2E_KEEP_CLUSTER:-0}" != 1 ]; then
    "$LOCAL/scripts/down.sh" || true
  elif running readyspan; then
    READYSPAN_ARGS="" "$LOCAL/scripts/readyspan.sh" restart >/dev/null || true
  fi
  exit "$rc"
}
trap finish EXIT

# The tests' witness of what readyspan exports: every span readyspan sends passes through
# otlpcapture on its way to Jaeger and is written to a file that, unlike Jaeger's query API,
# cannot merge duplicates (READYSPAN_E2E_CAPTURE tells the tests where it is).
mkdir -p "$STATE/e2e"
export READYSPAN_E2E_CAPTURE=$STATE/e2e/otlp-capture.jsonl
export READYSPAN_E2E_OTLP_ENDPOINT=http://$NODE_IP:$OTLP_CAPTURE_PORT
: >"$READYSPAN_E2E_CAPTURE"
(cd "$ROOT" && go build -o "$BIN/otlpcapture" ./test/e2e/otlpcapture)
stop otlpcapture >/dev/null 2>&1 || true
# On loopback for the local readyspan and on the bridge for the in-cluster test's replicas.
start otlpcapture "$BIN/otlpcapture" --listen "127.0.0.1:$OTLP_CAPTURE_PORT,$NODE_IP:$OTLP_CAPTURE_PORT" \
  --forward "127.0.0.1:$JAEGER_OTLP_GRPC_PORT" --out "$READYSPAN_E2E_CAPTURE"
wait_for otlpcapture 10 bash -c "echo >/dev/tcp/127.0.0.1/$OTLP_CAPTURE_PORT"

# Failed traces after 20s instead of 2m; only the tests' own Pods (the in-cluster test runs its
# own readyspan for its workload); traces through the witness.
READYSPAN_ARGS="--fail-after 20s --selector readyspan.dev/e2e=local --otlp-endpoint 127.0.0.1:$OTLP_CAPTURE_PORT" \
  "$LOCAL/scripts/readyspan.sh" restart

# One package (./test/e2e/, not ./...), so go test streams each test's output as it runs.
# A missing prerequisite fails a test (never skips it) unless READYSPAN_E2E_ALLOW_SKIP=1, which
# only a person running single tests by hand may set; a skip here would let the suite pass
# without its assertions, so any skipped test fails the run.
unset READYSPAN_E2E_ALLOW_SKIP
start_time=$(date +%s)
test_log=$LOGS/e2e-test.log
echo "e2e: go test -tags e2e -count=1 -timeout 40m -v ./test/e2e/ $* (full output: ${test_log#"$ROOT"/})"
set +e
(cd "$ROOT" && go test -tags e2e -count=1 -timeout 40m -v ./test/e2e/ "$@" 2>&1) | tee "$test_log" |
  grep --line-buffered -E '^(=== RUN|\s*--- (PASS|FAIL|SKIP)|PASS$|FAIL|ok |panic)|_test\.go:[0-9]+:'
rc=${PIPESTATUS[0]}
set -e
skipped=$(grep -E '^\s*--- SKIP' "$test_log" || true)
if [ -n "$skipped" ]; then
  echo "e2e: these tests were skipped; make e2e requires every test to run:" >&2
  echo "$skipped" >&2
  [ "$rc" = 0 ] && rc=1
fi
failure_summary "$test_log"
echo "e2e: finished in $(($(date +%s) - start_time))s (exit $rc)"
exit $rc
