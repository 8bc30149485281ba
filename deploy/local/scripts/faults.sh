#!/usr/bin/env bash
# The fault suite (make e2e-faults): like e2e.sh, on the local cluster, with this tree's
# readyspan exporting through the OTLP witness, then `go test -tags e2e,e2e_faults -run TestFault`.
# The tests inject faults through this script's actions (READYSPAN_FAULTS_SCRIPT):
#
#   faults.sh otlp-down | otlp-up          stop / start the OTLP witness readyspan exports to
#   faults.sh kill NAME                    SIGKILL a component started by up.sh (no drain)
#   faults.sh restart NAME                 start it again with the command line it had
#   faults.sh readyspan-start              start readyspan again (after a kill)
#   faults.sh peak-rss NAME                the process's peak RSS in KiB (VmHWM)
source "$(dirname "$0")/lib.sh"

capture_args() {
  echo "$BIN/otlpcapture" --listen "127.0.0.1:$OTLP_CAPTURE_PORT,$NODE_IP:$OTLP_CAPTURE_PORT" \
    --forward "127.0.0.1:$JAEGER_OTLP_GRPC_PORT" --out "$READYSPAN_E2E_CAPTURE"
}

case ${1:-} in
  otlp-down) stop otlpcapture 5; exit 0 ;;
  otlp-up)
    running otlpcapture && exit 0
    # shellcheck disable=SC2046 # words
    start otlpcapture $(capture_args)
    wait_for otlpcapture 10 bash -c "echo >/dev/tcp/127.0.0.1/$OTLP_CAPTURE_PORT"
    exit 0 ;;
  kill)
    p=$(pid_of "$2"); [ -n "$p" ] || { echo "no PID for $2" >&2; exit 1; }
    tr '\0' '\n' <"/proc/$p/cmdline" >"$RUN/$2.cmdline"
    kill -9 "$p"; while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    exit 0 ;;
  restart)
    mapfile -t cmd <"$RUN/$2.cmdline"
    start "$2" "${cmd[@]}"
    exit 0 ;;
  readyspan-start) "$LOCAL/scripts/readyspan.sh" start; exit 0 ;;
  peak-rss) awk '/VmHWM/ {print $2}' "/proc/$(pid_of "$2")/status"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [otlp-down|otlp-up|kill NAME|restart NAME|readyspan-start|peak-rss NAME]" >&2; exit 2 ;;
esac

lock_cluster
export READYSPAN_LOCAL_LOCK_HELD=1
started=0
if ! "$LOCAL/scripts/status.sh" --check >/dev/null 2>&1; then
  "$LOCAL/scripts/up.sh"
  started=1
fi
finish() {
  local rc=$?
  stop otlpcapture || true
  if [ "$started" = 1 ] && [ "${E2E_KEEP_CLUSTER:-0}" != 1 ]; then
    "$LOCAL/scripts/down.sh" || true
  else
    READYSPAN_BIN="" READYSPAN_ARGS="" "$LOCAL/scripts/readyspan.sh" restart >/dev/null || true
  fi
  exit "$rc"
}
trap finish EXIT

mkdir -p "$STATE/e2e" "$STATE/faults"
export READYSPAN_E2E_CAPTURE=$STATE/e2e/otlp-capture.jsonl
export READYSPAN_FAULTS_SCRIPT=$LOCAL/scripts/faults.sh
: >"$READYSPAN_E2E_CAPTURE"
# This tree's readyspan (bin/ may be shared with other checkouts), and the witness.
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$STATE/faults/readyspan" ./cmd/readyspan && go build -o "$BIN/otlpcapture" ./test/e2e/otlpcapture)
export READYSPAN_BIN=$STATE/faults/readyspan
stop otlpcapture >/dev/null 2>&1 || true
"$0" otlp-up
# Short backoff ceiling so a returning backend is retried within seconds.
READYSPAN_ARGS="--fail-after 20s --selector readyspan.dev/e2e=local --otlp-endpoint 127.0.0.1:$OTLP_CAPTURE_PORT" \
  "$LOCAL/scripts/readyspan.sh" restart

unset READYSPAN_E2E_ALLOW_SKIP
test_log=$LOGS/e2e-faults.log
echo "e2e-faults: go test -tags e2e,e2e_faults -run TestFault $* (full output: ${test_log#"$ROOT"/})"
set +e
(cd "$ROOT" && go test -tags e2e,e2e_faults -count=1 -timeout 18m -v -run "${FAULTS_RUN:-TestFault}" ./test/e2e/ "$@" 2>&1) | tee "$test_log" |
  grep --line-buffered -E '^(=== RUN|\s*--- (PASS|FAIL|SKIP)|PASS$|FAIL|ok |panic)|_test\.go:[0-9]+:'
rc=${PIPESTATUS[0]}
set -e
exit "$rc"
