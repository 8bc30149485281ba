#!/usr/bin/env bash
# Runs `bin/readyspan run` against the local cluster, in the background (PID file
# .local/run/readyspan.pid, log .local/logs/readyspan.log). up.sh starts it; the e2e restarts it.
#
#   readyspan.sh start|stop|restart|status
#
# READYSPAN_GID runs it with that group (make e2e-faults, so iptables can cut it off alone).
# READYSPAN_BIN runs another build (make e2e-faults: this tree's). READYSPAN_ARGS adds flags (e.g. "--fail-after 20s"); start remembers them in
# .local/run/readyspan.args, so a later restart without READYSPAN_ARGS keeps them. readyspan follows
# the apiserver's audit log (a measured apiserver phase) and keeps a state file, so a restart
# neither repeats nor loses a trace.
source "$(dirname "$0")/lib.sh"

args_file=$RUN/readyspan.args

do_start() {
  [ -x "${READYSPAN_BIN:-$BIN/readyspan}" ] || { echo "error: ${READYSPAN_BIN:-bin/readyspan} is not built (make build)" >&2; exit 1; }
  if running readyspan; then echo "readyspan already running (pid $(pid_of readyspan))"; return 0; fi
  local extra
  if [ -n "${READYSPAN_ARGS+set}" ]; then extra=$READYSPAN_ARGS; else extra=$(cat "$args_file" 2>/dev/null || true); fi
  printf '%s' "$extra" >"$args_file"
  # shellcheck disable=SC2086 # extra flags are words
  local as_group=()
  [ -z "${READYSPAN_GID:-}" ] || as_group=(setpriv --regid "$READYSPAN_GID" --clear-groups --)
  start readyspan "${as_group[@]}" "${READYSPAN_BIN:-$BIN/readyspan}" run --kubeconfig "$KUBECONFIG_FILE" --metrics-addr "$READYSPAN_METRICS" \
    --otlp-endpoint "127.0.0.1:$JAEGER_OTLP_GRPC_PORT" --otlp-insecure \
    --audit-log "$LOGS/audit.log" --state-file "$RUN/readyspan.state" \
    --trace-ui-url "http://$JAEGER_QUERY/trace/{trace_id}" $extra
  wait_for readyspan 60 curl -sf "http://$READYSPAN_METRICS/readyz"
  echo "readyspan running (pid $(pid_of readyspan)) ${extra:+with $extra}"
}

case ${1:-} in
  start) do_start ;;
  stop) stop readyspan 15; echo "readyspan stopped" ;;
  restart) stop readyspan 15; do_start ;;
  status) if running readyspan; then echo "readyspan up (pid $(pid_of readyspan))"; else echo "readyspan down"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|restart|status" >&2; exit 2 ;;
esac
