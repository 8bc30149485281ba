#!/usr/bin/env bash
# The end-to-end tests (make e2e): brings the local cluster up when it is not (and takes it down
# again afterwards, unless E2E_KEEP_CLUSTER=1), runs the local readyspan with the tests' settings,
# then `go test -tags e2e ./test/e2e/...`. Extra arguments go to go test (e.g. -run TestColdPull -v).
source "$(dirname "$0")/lib.sh"

lock_cluster
started=0
if ! "$LOCAL/scripts/status.sh" --check >/dev/null 2>&1; then
  "$LOCAL/scripts/up.sh"
  started=1
fi
# shellcheck disable=SC2317 # finish runs from the EXIT trap
finish() {
  local rc=$?
  # Back to the everyday settings, or down if this script brought the cluster up.
  if [ "$started" = 1 ] && [ "${E2E_KEEP_CLUSTER:-0}" != 1 ]; then
    "$LOCAL/scripts/down.sh" || true
  elif running readyspan; then
    READYSPAN_ARGS="" "$LOCAL/scripts/readyspan.sh" restart >/dev/null || true
  fi
  exit "$rc"
}
trap finish EXIT

# Failed traces after 20s instead of 2m; only the tests' own Pods (the in-cluster test runs its
# own readyspan for its workload).
READYSPAN_ARGS="--fail-after 20s --selector readyspan.dev/e2e=local" "$LOCAL/scripts/readyspan.sh" restart

start_time=$(date +%s)
echo "e2e: go test -tags e2e -count=1 -timeout 30m ./test/e2e/... $*"
set +e
(cd "$ROOT" && go test -tags e2e -count=1 -timeout 30m ./test/e2e/... "$@")
rc=$?
set -e
echo "e2e: finished in $(($(date +%s) - start_time))s (exit $rc)"
exit $rc
