#!/usr/bin/env bash
# The fault suite (make e2e-faults): like e2e.sh, on the local cluster, with this tree's
# readyspan exporting through the OTLP witness, then `go test -tags e2e,e2e_faults -run TestFault`.
# The tests inject faults through this script's actions (READYSPAN_FAULTS_SCRIPT):
#
#   faults.sh otlp-down | otlp-up          stop / start the OTLP witness readyspan exports to
#   faults.sh otlp-restart [FLAG...]       start it again as a bad backend: --delay 5s (slow),
#                                          --refuse-for 60s (answering errors); none: a good one
#   faults.sh kill NAME                    SIGKILL a component started by up.sh (no drain)
#   faults.sh restart NAME                 start it again with the command line it had
#   faults.sh readyspan-start              start readyspan again (after a kill)
#   faults.sh peak-rss NAME                the process's peak RSS in KiB (VmHWM)
#   faults.sh cpu-seconds NAME             the process's user + system CPU time so far
#   faults.sh cut-off | reconnect          drop / let through readyspan's packets to the apiserver
#   faults.sh compact                      compact etcd at its current revision (prints it)
#   faults.sh kwok-up | kwok-down          start / stop KWOK for the nodes annotated
#                                          kwok.x-k8s.io/node=fake, its kubelet stamps skewed by
#                                          node: skew-ahead +2 s, skew-behind -2 s, others none
source "$(dirname "$0")/lib.sh"

# readyspan runs with a group of its own (readyspan.sh: READYSPAN_GID), so an iptables rule can
# cut it, and only it, off from the apiserver: the owner match sees the socket's group.
export READYSPAN_GID=${READYSPAN_GID:-4242}
cut_rule=(OUTPUT -p tcp --dport "$APISERVER_PORT" -m owner --gid-owner "$READYSPAN_GID" -j DROP)

# skewed_stages OFFSET SUFFIX OPERATOR VALUES: config/kwok/pod-startup.yaml with every time its
# templates take (Now, and sprig's now: conditions, startTime, startedAt, Event times and the
# UnixNano in Event names) moved by OFFSET (a Go duration, sprig's dateModify), each stage renamed
# with SUFFIX and limited to the Pods whose .spec.nodeName is OPERATOR (In, NotIn) VALUES.
skewed_stages() {
  local layout='2006-01-02T15:04:05.999999999Z07:00'
  awk -v off="$1" -v suf="$2" -v op="$3" -v vals="$4" -v layout="$layout" '
    /^  name: readyspan-pod-/ { print $0 "-" suf; next }
    {
      line = $0
      shifted = "(dateModify \"" off "\" now)"
      gsub(/\(now\)/, shifted, line)
      gsub(/ now \|/, " " shifted " |", line)
      gsub(/Now/, "(dateModify \"" off "\" now | date \"" layout "\")", line)
      print line
    }
    /^    matchExpressions:$/ {
      print "    - key: \x27.spec.nodeName\x27"
      print "      operator: \x27" op "\x27"
      print "      values: [" vals "]"
    }' "$LOCAL/config/kwok/pod-startup.yaml"
}

capture_args() {
  echo "$BIN/otlpcapture" --listen "127.0.0.1:$OTLP_CAPTURE_PORT,$NODE_IP:$OTLP_CAPTURE_PORT" \
    --forward "127.0.0.1:$JAEGER_OTLP_GRPC_PORT" --out "$READYSPAN_E2E_CAPTURE"
}

case ${1:-} in
  otlp-down) stop otlpcapture 5; exit 0 ;;
  otlp-up | otlp-restart)
    if [ "$1" = otlp-restart ]; then stop otlpcapture 5; elif running otlpcapture; then exit 0; fi
    # shellcheck disable=SC2046 # words
    start otlpcapture $(capture_args) "${@:2}"
    wait_for otlpcapture 10 bash -c "echo >/dev/tcp/127.0.0.1/$OTLP_CAPTURE_PORT"
    exit 0 ;;
  kill)
    p=$(pid_of "$2"); [ -n "$p" ] || { echo "no PID for $2" >&2; exit 1; }
    tr '\0' '\n' <"/proc/$p/cmdline" >"$RUN/$2.cmdline"
    kill -9 "$p"; while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    exit 0 ;;
  restart)
    mapfile -t cmd <"$RUN/$2.cmdline"
    case $2 in
      # up.sh runs them in the node's mount namespace through nsenter, which execs: the saved
      # command line is the binary's own, so enter the namespace again.
      kubelet | containerd) cmd=(nsenter -t "$(pid_of node-namespace)" -m -- "${cmd[@]}") ;;
    esac
    start "$2" "${cmd[@]}"
    exit 0 ;;
  cpu-seconds)
    # utime and stime, fields 14 and 15 of /proc/PID/stat, in clock ticks.
    awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$(pid_of "$2")/stat"; exit 0 ;;
  cut-off) iptables -C "${cut_rule[@]}" 2>/dev/null || iptables -I "${cut_rule[@]}"; exit 0 ;;
  reconnect) while iptables -D "${cut_rule[@]}" 2>/dev/null; do :; done; exit 0 ;;
  compact)
    # etcd's JSON gateway: the current revision from a one-key range, then a physical compaction
    # at it, so every older resourceVersion is gone from etcd (410 Gone for a watch from it).
    rev=$(curl -sf -X POST "http://127.0.0.1:$ETCD_PORT/v3/kv/range" -d '{"key":"AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
    [ -n "$rev" ] || { echo "etcd did not tell its revision" >&2; exit 1; }
    curl -sf -X POST "http://127.0.0.1:$ETCD_PORT/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
    echo "$rev"; exit 0 ;;
  readyspan-start) "$LOCAL/scripts/readyspan.sh" start; exit 0 ;;
  peak-rss) awk '/VmHWM/ {print $2}' "/proc/$(pid_of "$2")/status"; exit 0 ;;
  kwok-up)
    running kwok && exit 0
    [ -x "$BIN/kwok" ] || { echo "bin/kwok is not built (deploy/local/scripts/build.sh kwok)" >&2; exit 1; }
    stages=$STATE/faults/kwok
    mkdir -p "$stages"
    skewed_stages +2s ahead In "'skew-ahead'" >"$stages/pod-startup-ahead.yaml"
    skewed_stages -2s behind In "'skew-behind'" >"$stages/pod-startup-behind.yaml"
    skewed_stages +0s none NotIn "'skew-ahead', 'skew-behind'" >"$stages/pod-startup-none.yaml"
    # As scale.sh starts it; fake Pods' IPs come from --cidr, nothing routes them.
    start kwok "$BIN/kwok" --kubeconfig "$KUBECONFIG_FILE" \
      --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
      --config "$LOCAL/config/kwok/kwok.yaml" --config "$LOCAL/config/kwok/node-initialize.yaml" \
      --config "$LOCAL/config/kwok/node-heartbeat-with-lease.yaml" \
      --config "$stages/pod-startup-ahead.yaml" --config "$stages/pod-startup-behind.yaml" \
      --config "$stages/pod-startup-none.yaml" \
      --node-lease-duration-seconds 40 --cidr 10.200.0.0/16 --server-address 127.0.0.1:10247
    wait_for kwok 30 curl -sf http://127.0.0.1:10247/healthz
    exit 0 ;;
  kwok-down) stop kwok 10; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [otlp-down|otlp-up|otlp-restart [FLAG...]|kill NAME|restart NAME|readyspan-start|peak-rss NAME|cpu-seconds NAME|cut-off|reconnect|compact|kwok-up|kwok-down]" >&2; exit 2 ;;
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
  "$0" reconnect || true
  stop otlpcapture || true
  stop kwok || true # kwok-up's, if a test could not stop it
  if [ "$started" = 1 ] && [ "${E2E_KEEP_CLUSTER:-0}" != 1 ]; then
    "$LOCAL/scripts/down.sh" || true
  else
    READYSPAN_BIN="" READYSPAN_ARGS="" READYSPAN_GID="" "$LOCAL/scripts/readyspan.sh" restart >/dev/null || true
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
(cd "$ROOT" && go test -tags e2e,e2e_faults -count=1 -timeout 40m -v -run "${FAULTS_RUN:-TestFault}" ./test/e2e/ "$@" 2>&1) | tee "$test_log" |
  grep --line-buffered -E '^(=== RUN|\s*--- (PASS|FAIL|SKIP)|PASS$|FAIL|ok |panic)|_test\.go:[0-9]+:'
rc=${PIPESTATUS[0]}
set -e
failure_summary "$test_log"
exit "$rc"
