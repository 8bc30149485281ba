#!/usr/bin/env bash
# Captures a real node autoscaler at work on the local cluster (the cluster must be up: make
# cluster-up): Karpenter with its KWOK provider (scripts/karpenter.sh) provisions Nodes for a
# Deployment whose Pods fit no existing node, then consolidates them when it is scaled down.
#
#   1. a Deployment of three Pods (busybox, never run: kwok plays their kubelet) requesting 700m
#      CPU each, selecting readyspan.dev/pool=karpenter and tolerating that taint: the local node
#      has no such label, so the scheduler fails them (FailedScheduling), and Karpenter creates
#      NodeClaims (a c-2x holds two such Pods, a c-1x one) and, 5 s later (nodeRegistrationDelay),
#      its KWOK provider their Nodes; kwok's stages (config/kwok/node-autoscaled.yaml) turn each
#      Ready and remove its startup taint, and the scheduler binds the Pods there;
#   2. scaled to 2: the ReplicaSet deletes a Pod of the Node that has two, so each Node has one;
#      Karpenter consolidates (Underutilized), in the runs so far by replacing the c-2x with a c-1x:
#      it evicts the c-2x's Pod (Evicted) once the new Node is initialized, and deletes the c-2x;
#      the script waits for an Evicted event and a settled cluster;
#   3. scaled to 0: the Nodes are empty, and Karpenter deletes them (Empty).
#
# OUTDIR is readyspan's recording of the whole cluster (readyspan record -A: the Nodes and
# NodeClaims are cluster-scoped, and Karpenter's Events about them are in default; the cluster is
# otherwise idle), and beside it the
# watch streams kubectl served, with managed fields (nodeclaims.watch.json, nodes.watch.json,
# events.default.watch.json: Events about NodeClaims, Nodes and the NodePool are in default, only
# this run's kept, events.NS.watch.json), List snapshots after step 2 (nodeclaims.list.json,
# nodes.list.json, pods.list.json), the core/v1 Events at the end (events.default.list.json,
# events.NS.list.json) and karpenter.log. No snapshot is named <stream>.json: readyspan would read
# such a file in a directory as a recording's List snapshot.
#
#   capture-karpenter.sh OUTDIR
source "$(dirname "$0")/lib.sh"

out=${1:?usage: capture-karpenter.sh OUTDIR}
ns=${CAPTURE_NS:-karpenter-capture}
[ -x "$BIN/readyspan" ] || { echo "error: bin/readyspan is not built (make build)" >&2; exit 1; }
running kube-apiserver || { echo "error: the local cluster is not up (make cluster-up)" >&2; exit 1; }
running karpenter && { echo "error: a karpenter is running already (pid $(pid_of karpenter)): karpenter.sh stop" >&2; exit 1; }
SKIP_PACKAGES=1 "$LOCAL/scripts/build.sh" karpenter kwok helm
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out"/watch.*.jsonl "$out"/*.json "$out/karpenter.log"

watches=(nodeclaims nodes events-default events-ns)
cleanup() {
  local w
  stop capture-record 10
  for w in "${watches[@]}"; do stop "capture-$w-watch" 5; done
  "$LOCAL/scripts/karpenter.sh" stop
}
trap cleanup EXIT

kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=60s
kubectl create namespace "$ns"
# Events in default outlive a run (an hour): only this run's are kept (from a second before it).
since=$(date -u -d '-1 second' +%FT%TZ)
log_start=$(wc -c <"$LOGS/karpenter.log" 2>/dev/null || echo 0)
"$LOCAL/scripts/karpenter.sh" start

start capture-record "$BIN/readyspan" record "$out" -A --kubeconfig "$KUBECONFIG_FILE"
# watch_into NAME FILE ARGS...: kubectl's watch stream of ARGS into FILE, with managed fields.
watch_into() {
  local name=$1 file=$2; shift 2
  # shellcheck disable=SC2016 # expanded by the inner bash: $0 the file, $@ the command
  start "capture-$name-watch" bash -c 'exec "$@" >"$0"' "$out/$file" \
    "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" get "$@" --watch --output-watch-events --show-managed-fields -o json
}
watch_into nodeclaims nodeclaims.watch.json nodeclaims.karpenter.sh
watch_into nodes nodes.watch.json nodes
watch_into events-default events.default.watch.json events -n default
watch_into events-ns "events.$ns.watch.json" events -n "$ns"
sleep 3

kubectl apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $ns, labels: {app: web}}
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 2
      nodeSelector: {readyspan.dev/pool: karpenter}
      tolerations:
        - {key: readyspan.dev/pool, operator: Equal, value: karpenter, effect: NoSchedule}
      containers:
        - name: web
          image: $BUSYBOX_IMAGE
          command: [sleep, "3600"]
          resources:
            requests: {cpu: 700m, memory: 64Mi}
YAML

# until SECONDS WHAT CMD...: wait for CMD, failing with WHAT (and Karpenter's log) after SECONDS.
until_ok() {
  local timeout=$1 what=$2; shift 2
  local deadline=$(($(date +%s) + timeout))
  until "$@"; do
    running karpenter || die karpenter "exited while waiting for $what"
    [ "$(date +%s)" -lt "$deadline" ] || { kubectl get nodeclaims,nodes,pods -A -o wide >&2; die karpenter "no $what after ${timeout}s"; }
    sleep 1
  done
}
# settled N: N Pods, all Ready; every NodeClaim Ready and not being deleted, one Node each.
settled() {
  local pods ready claims nodes
  pods=$(kubectl get pods -n "$ns" -o json)
  [ "$(jq '.items | length' <<<"$pods")" = "$1" ] || return 1
  ready=$(jq '[.items[] | select(.metadata.deletionTimestamp == null) | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length' <<<"$pods")
  [ "$ready" = "$1" ] || return 1
  claims=$(kubectl get nodeclaims.karpenter.sh -o json)
  jq -e 'all(.items[]; .metadata.deletionTimestamp == null and any(.status.conditions[]?; .type == "Ready" and .status == "True"))' <<<"$claims" >/dev/null || return 1
  nodes=$(kubectl get nodes -l karpenter.sh/nodepool -o name | wc -l)
  [ "$nodes" = "$(jq '.items | length' <<<"$claims")" ]
}
evicted() {
  kubectl get events -n "$ns" -o json | jq -e 'any(.items[]; .reason == "Evicted" and .source.component == "karpenter")' >/dev/null
}
no_nodes() {
  [ "$(kubectl get nodes -l karpenter.sh/nodepool -o name | wc -l)" = 0 ] && [ "$(kubectl get nodeclaims.karpenter.sh -o name | wc -l)" = 0 ]
}

until_ok 180 "3 Pods Ready on Karpenter's Nodes" settled 3
sleep 5
kubectl scale deployment web -n "$ns" --replicas 2
until_ok 300 "consolidation (an Evicted Pod, then 2 Pods Ready)" evicted
until_ok 180 "a settled cluster after the consolidation" settled 2
sleep 3
kubectl get nodeclaims.karpenter.sh -o json --show-managed-fields >"$out/nodeclaims.list.json"
kubectl get nodes -o json --show-managed-fields >"$out/nodes.list.json"
kubectl get pods -n "$ns" -o json >"$out/pods.list.json"

kubectl scale deployment web -n "$ns" --replicas 0
until_ok 300 "the last Node's deletion (Empty)" no_nodes
# The last Events and watch events reach the recording.
sleep 3
# this_run: an Event (or a watch event's object) written since the run started.
# shellcheck disable=SC2016 # $since is jq's variable
this_run='(.lastTimestamp // .eventTime // .firstTimestamp // .metadata.creationTimestamp) >= $since'
kubectl get events -n default -o json | jq --arg since "$since" ".items |= map(select($this_run))" >"$out/events.default.list.json"
kubectl get events -n "$ns" -o json >"$out/events.$ns.list.json"
cleanup
trap - EXIT
jq --arg since "$since" "select(.object | $this_run)" "$out/events.default.watch.json" >"$out/events.default.watch.json.tmp"
mv "$out/events.default.watch.json.tmp" "$out/events.default.watch.json"
# Karpenter's log of this run, with paths relative to the repository.
tail -c +"$((log_start + 1))" "$LOGS/karpenter.log" | sed "s|$ROOT/||g" >"$out/karpenter.log"
kubectl delete namespace "$ns" --wait=false
echo "captured: $(jq -s '[.[] | select(.type == "ADDED")] | length' "$out/nodeclaims.watch.json") NodeClaims," \
  "$(jq '[.items[] | select(.source.component == "karpenter")] | length' "$out/events.$ns.list.json") Karpenter Events on Pods," \
  "$(jq '[.items[] | select(.source.component == "karpenter")] | length' "$out/events.default.list.json") on NodeClaims and Nodes; recording in $out"
