#!/usr/bin/env bash
# Records the scale test bed's own load for the ceiling measurement (docs/scale.md): runs one
# create-only level of `make scale` (SCALE_RATE 25 Pods/s by default) and, from the moment its
# apiserver answers, `ceiling record` beside it: whole objects, as the apiserver sends them. Then
# takes the test bed down and compresses the recording into OUT.tar.gz.
#
# Brings the local cluster up (it must be down, as for make scale):
#   test/scale/ceiling/record.sh .local/rec/kwok-25
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:?usage: record.sh OUT (the recording is written to OUT/, then OUT.tar.gz)}
cd "$root"
export GOTOOLCHAIN=${GOTOOLCHAIN:-$(awk '/^toolchain /{print $2}' go.mod)}
ceiling=${CEILING:-bin/ceiling}
[ -n "${CEILING:-}" ] || go build -o bin/ceiling ./test/scale/ceiling
make build
rm -rf "$out" && mkdir -p "$out"
SCALE_KEEP_CLUSTER=1 SCALE_NODES=${SCALE_NODES:-50} SCALE_PODS=${SCALE_PODS:-400} SCALE_RATE=${SCALE_RATE:-25} \
  SCALE_ROLLS=0 SCALE_ARGS="--restart=false" deploy/local/scripts/scale.sh &
scale=$!
cleanup() { deploy/local/scripts/down.sh || true; }
trap cleanup EXIT
# scalerun makes the fake nodes and the users once the cluster is up: recording from then on
# holds everything the load makes.
until bin/kubectl --kubeconfig .local/kubeconfig get --raw /readyz >/dev/null 2>&1 &&
  bin/kubectl --kubeconfig .local/kubeconfig get namespace default >/dev/null 2>&1; do
  kill -0 "$scale" 2>/dev/null || { echo "record.sh: the test bed stopped before its apiserver answered" >&2; exit 1; }
  sleep 0.5
done
"$ceiling" record --kubeconfig .local/kubeconfig --out "$out" &
rec=$!
rc=0
wait "$scale" || rc=$?
kill "$rec" && wait "$rec" || true
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
ls -la "$out" "$out.tar.gz"
exit "$rc"
