#!/usr/bin/env bash
# Runs the node component, `bin/readyspan node`, for the local cluster's one real node
# ($NODE_NAME of lib.sh), as a process on the host: root, in the host's network namespace, where
# kube-proxy's rules are, as the DaemonSet runs it on a cluster's nodes (docs/last-mile.md).
#
#   readyspan-node.sh start|stop|status
#
# It reports to the local readyspan's OTLP input, 127.0.0.1:$READYSPAN_OTLP_PORT, in plain text and
# without a token (a loopback input trusts every local process), so readyspan must run with it:
#   READYSPAN_ARGS="--otlp-receive 127.0.0.1:4321" deploy/local/scripts/readyspan.sh restart
# (demo.sh does so). Until it does, the component keeps its reports queued and retries.
# PID .local/run/readyspan-node.pid, log .local/logs/readyspan-node.log, /metrics and /healthz on
# $READYSPAN_NODE_METRICS. READYSPAN_NODE_ARGS adds flags (e.g. "--poll 50ms --log-level debug").
source "$(dirname "$0")/lib.sh"

do_start() {
  [ -x "$BIN/readyspan" ] || { echo "error: bin/readyspan is not built (make build)" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "error: reading kube-proxy's rules over netlink needs root (NET_ADMIN)" >&2; exit 1; }
  running kube-proxy || { echo "error: the local cluster's kube-proxy is not running (make cluster-up)" >&2; exit 1; }
  if running readyspan-node; then echo "readyspan-node already running (pid $(pid_of readyspan-node))"; return 0; fi
  if ! (echo >"/dev/tcp/127.0.0.1/$READYSPAN_OTLP_PORT") 2>/dev/null; then
    echo "warning: nothing listens on 127.0.0.1:$READYSPAN_OTLP_PORT: start readyspan with" >&2
    echo "  READYSPAN_ARGS=\"--otlp-receive 127.0.0.1:$READYSPAN_OTLP_PORT\" deploy/local/scripts/readyspan.sh restart" >&2
    echo "  (the node component queues its reports meanwhile)" >&2
  fi
  if (echo >"/dev/tcp/${READYSPAN_NODE_METRICS%:*}/${READYSPAN_NODE_METRICS##*:}") 2>/dev/null; then
    echo "error: $READYSPAN_NODE_METRICS is taken (another readyspan node?)" >&2
    exit 1
  fi
  # shellcheck disable=SC2086 # extra flags are words
  start readyspan-node "$BIN/readyspan" node --node-name "$NODE_NAME" \
    --otlp-endpoint "127.0.0.1:$READYSPAN_OTLP_PORT" --otlp-insecure \
    --metrics-addr "$READYSPAN_NODE_METRICS" ${READYSPAN_NODE_ARGS:-}
  wait_for readyspan-node 30 curl -sf "http://$READYSPAN_NODE_METRICS/healthz"
  echo "readyspan-node running (pid $(pid_of readyspan-node)) for node $NODE_NAME, reporting to 127.0.0.1:$READYSPAN_OTLP_PORT"
}

case ${1:-} in
  start) do_start ;;
  stop) stop readyspan-node 10; echo "readyspan-node stopped" ;;
  status)
    if running readyspan-node; then
      echo "readyspan-node up (pid $(pid_of readyspan-node)), metrics http://$READYSPAN_NODE_METRICS/metrics"
      curl -sf "http://$READYSPAN_NODE_METRICS/healthz" | sed 's/^/  /' || true
    else
      echo "readyspan-node down"; exit 1
    fi ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
