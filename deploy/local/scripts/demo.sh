#!/usr/bin/env bash
# The demo (make demo): brings the local cluster up if needed, applies deploy/examples/ in the
# namespace readyspan-demo, labels the node a few seconds later so the unschedulable Pod can be
# bound, and shows `readyspan watch` waterfalls as the Pods' startups complete (until all seven
# have or DEMO_SECONDS, default 90, have passed), with the components' own spans joined in (the
# admission webhook's call for web's Pods). Then it rolls web out again (a template change)
# and shows the rollout's Gantt chart, and prints where to look next.
source "$(dirname "$0")/lib.sh"

ns=readyspan-demo
label=readyspan.dev/demo
expected=7   # web x3, cold-pull, needs-label, missing-image, crash-loop
seconds=${DEMO_SECONDS:-90}

[ -x "$BIN/readyspan" ] || { echo "error: bin/readyspan is not built (make build)" >&2; exit 1; }
lock_cluster
if ! "$LOCAL/scripts/status.sh" --check >/dev/null 2>&1; then
  "$LOCAL/scripts/up.sh"
  echo
fi

echo "demo: resetting namespace $ns"
kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=60s >/dev/null
kubectl label node "$NODE_NAME" "$label-" >/dev/null 2>&1 || true

watch_log=$LOGS/demo-watch.log
# The watch receives the components' own spans (apiserver, kubelet, containerd), which Jaeger
# forwards to READYSPAN_OTLP_PORT, and joins them into the waterfalls: web's Pods show the
# admission webhook's call inside controllers.replicaset. Not when a readyspan run listens there
# already (READYSPAN_ARGS with --otlp-receive): its traces in Jaeger have them instead.
receive=(--otlp-receive "127.0.0.1:$READYSPAN_OTLP_PORT")
if (echo >"/dev/tcp/127.0.0.1/$READYSPAN_OTLP_PORT") 2>/dev/null; then
  echo "demo: 127.0.0.1:$READYSPAN_OTLP_PORT is taken (readyspan run --otlp-receive?): the watch shows no component spans"
  receive=()
fi
echo "demo: readyspan watch (waterfalls appear as each Pod's startup completes, a few seconds later with the components' spans; failures after 30s)"
echo
"$BIN/readyspan" watch --kubeconfig "$KUBECONFIG_FILE" --namespace "$ns" --fail-after 30s --audit-log "$LOGS/audit.log" \
  "${receive[@]}" --for "$((seconds + 100))s" > >(tee "$watch_log") 2>>"$LOGS/demo-watch.err" &
watch_pid=$!
trap 'kill $watch_pid 2>/dev/null || true' EXIT
sleep 2

kubectl apply -f "$ROOT/deploy/examples/00-namespace.yaml" >/dev/null
wait_for kube-controller-manager 30 kubectl get serviceaccount default -n "$ns"
# A fresh tag each run: the registry creates it on first pull, so the pull is always cold.
cold_tag=demo-$(date +%s)
for f in "$ROOT"/deploy/examples/*.yaml; do
  [ "$(basename "$f")" = 00-namespace.yaml ] && continue
  sed "s|readyspan/cold:demo|readyspan/cold:$cold_tag|" "$f"
  echo "---"
done | kubectl apply -f - | sed 's/^/demo: /'

sleep 5
echo "demo: labelling node $NODE_NAME $label=ready, so needs-label can be scheduled"
kubectl label node "$NODE_NAME" "$label=ready" --overwrite >/dev/null

deadline=$(($(date +%s) + seconds))
while [ "$(date +%s)" -lt "$deadline" ] && kill -0 "$watch_pid" 2>/dev/null; do
  [ "$(grep -c "^$ns/.*  trace " "$watch_log" 2>/dev/null)" -ge "$expected" ] && break
  sleep 1
done
done_count=$(grep -c "^$ns/.*  trace " "$watch_log" 2>/dev/null || true)

# A rolling update of web: a new template, so three new Pods replace the old ones one wave at a
# time (maxSurge 1, maxUnavailable 0); the watch prints the rollout as a Gantt chart when it ends.
echo
echo "demo: rolling out web again (kubectl set env deployment/web DEMO_REVISION=2)"
kubectl -n "$ns" set env deployment/web DEMO_REVISION=2 | sed 's/^/demo: /'
rollout_deadline=$(($(date +%s) + 90))
while [ "$(date +%s)" -lt "$rollout_deadline" ] && kill -0 "$watch_pid" 2>/dev/null; do
  grep -q "^deployment $ns/web  rollout update" "$watch_log" 2>/dev/null && break
  sleep 1
done
sleep 1
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
trap - EXIT
rollouts=$(grep -c "^deployment $ns/web  rollout update" "$watch_log" 2>/dev/null || true)

cat <<EOF

demo: $done_count of $expected Pod startups and $rollouts of 1 rolling update traced by \`readyspan watch\` (full output: ${watch_log#"$ROOT"/}).
The background \`readyspan run\` exports the same traces to Jaeger (failed Pods after its --fail-after,
2 minutes by default) and their durations to Prometheus. Where to look next:

  # readyspan's own UI: the rollouts, each as a Gantt chart, and every Pod's waterfall
  http://$READYSPAN_METRICS/

  # traces in Jaeger (trace ID = Pod UID without dashes)
  curl -s 'http://$JAEGER_QUERY/api/traces?service=readyspan&limit=20' | jq -r '.data[] | .traceID + "  " + ([.spans[] | select(.operationName=="pod.startup") | .tags[] | select(.key=="k8s.pod.name") | .value] | join(""))'
  uid=\$(bin/kubectl --kubeconfig .local/kubeconfig -n $ns get pod cold-pull -o jsonpath='{.metadata.uid}' | tr -d -)
  curl -s http://$JAEGER_QUERY/api/traces/\$uid | jq -r '.data[0].spans[] | "\(.operationName) \(.duration)us"'

  # the background readyspan run with the components' spans too (the watch must be done: same port)
  READYSPAN_ARGS="--otlp-receive 127.0.0.1:$READYSPAN_OTLP_PORT" deploy/local/scripts/readyspan.sh restart

  # phase durations in Prometheus
  curl -s http://$PROMETHEUS/api/v1/query --data-urlencode 'query=sum by (phase) (readyspan_phase_duration_seconds_count)' | jq -c '.data.result[] | [.metric.phase, .value[1]]'
  curl -s http://$PROMETHEUS/api/v1/query --data-urlencode 'query=histogram_quantile(0.9, sum by (le) (readyspan_image_pull_duration_seconds_bucket))' | jq -c '.data.result'

  # web's latest rollout as a Gantt chart, rebuilt from what the API still holds (--pods adds each Pod)
  bin/readyspan explain deployment/web -n $ns --kubeconfig .local/kubeconfig

  # rollout durations in Prometheus
  curl -s http://$PROMETHEUS/api/v1/query --data-urlencode 'query=sum by (workload, kind, outcome) (readyspan_rollout_duration_seconds_count)' | jq -c '.data.result[] | [.metric.workload, .metric.kind, .metric.outcome, .value[1]]'

  make cluster-status    # what runs where;   make cluster-down   # stop it all
EOF
