#!/usr/bin/env bash
# Runs `bin/podtrace run` against the local cluster, in the background (PID file
# .local/run/podtrace.pid, log .local/logs/podtrace.log). up.sh starts it; the e2e restarts it.
#
#   podtrace.sh start|stop|restart|status
#
# PODTRACE_ARGS adds flags (e.g. "--fail-after 20s"); start remembers them in
# .local/run/podtrace.args, so a later restart without PODTRACE_ARGS keeps them. podtrace follows
# the apiserver's audit log (a measured apiserver phase) and keeps a state file, so a restart
# neither repeats nor loses a trace.
source "$(dirname "$0")/lib.sh"

args_file=$RUN/podtrace.args

do_start() {
  [ -x "$BIN/podtrace" ] || { echo "error: bin/podtrace is not built (make build)" >&2; exit 1; }
  if running podtrace; then echo "podtrace already running (pid $(pid_of podtrace))"; return 0; fi
  local extra
  if [ -n "${PODTRACE_ARGS+set}" ]; then extra=$PODTRACE_ARGS; else extra=$(cat "$args_file" 2>/dev/null || true); fi
  printf '%s' "$extra" >"$args_file"
  # shellcheck disable=SC2086 # extra flags are words
  start podtrace "$BIN/podtrace" run --kubeconfig "$KUBECONFIG_FILE" --metrics-addr "$PODTRACE_METRICS" \
    --otlp-endpoint "127.0.0.1:$JAEGER_OTLP_GRPC_PORT" --otlp-insecure \
    --audit-log "$LOGS/audit.log" --state-file "$RUN/podtrace.state" $extra
  wait_for podtrace 60 curl -sf "http://$PODTRACE_METRICS/readyz"
  echo "podtrace running (pid $(pid_of podtrace)) ${extra:+with $extra}"
}

case ${1:-} in
  start) do_start ;;
  stop) stop podtrace 15; echo "podtrace stopped" ;;
  restart) stop podtrace 15; do_start ;;
  status) if running podtrace; then echo "podtrace up (pid $(pid_of podtrace))"; else echo "podtrace down"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|restart|status" >&2; exit 2 ;;
esac
