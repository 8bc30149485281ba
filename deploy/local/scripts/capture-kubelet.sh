#!/usr/bin/env bash
# Captures what one node's kubelet and runtime show, for the kubelet version matrix
# (tracer/testdata/real-node/kubelet-*, docs/kubelet-versions.md): readyspan's recording of a
# namespace in which four Pods start on the local node (the cluster must be up, with the kubelet
# and runtime to capture: make cluster-up KUBELET_VERSION=1.34), and beside it the evidence
# readyspan never reads:
#   cold      an image pulled anew (a new tag of the registry's cold repository, 2 s per blob)
#   warm      an image already on the node (pre-pulled by up.sh), IfNotPresent
#   missing   an image the registry does not have: ErrImagePull, then ImagePullBackOff
#   probes    a startup probe that passes after ~2 s and a readiness probe after ~4 s
# Evidence: List snapshots of the Pods and Events at the end (pods.json, events.*.json: the
# kubelet's messages and event names as the API served them), kubelet-cri-spans.jsonl (the kubelet's own spans of its CRI calls per Pod, as it
# exported them to Jaeger: method, start and end in µs) and node-info.json (the Node's nodeInfo:
# the kubelet's and the runtime's versions as they report them).
#
#   capture-kubelet.sh OUTDIR
source "$(dirname "$0")/lib.sh"

out=${1:?usage: capture-kubelet.sh OUTDIR}
[ -x "$BIN/readyspan" ] || { echo "error: bin/readyspan is not built (make build)" >&2; exit 1; }
running kube-apiserver || { echo "error: the local cluster is not up (make cluster-up)" >&2; exit 1; }
minor=$(node_kubelet_minor)
# One namespace per capture; its name says which node it ran on (kubelet-1-34; another runtime than
# containerd 2 is named too: kubelet-1-37-containerd-1-7).
runtime=$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}' |
  sed -E 's|^([a-z-]+)://([0-9]+)\.([0-9]+)\..*|\1-\2-\3|')
ns=kubelet-${minor//./-}
case $runtime in containerd-2-*) ;; *) ns=$ns-$runtime ;; esac
ns=${CAPTURE_NS:-$ns}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/watch.*.jsonl "$out"/*.json "$out/kubelet-cri-spans.jsonl"
kubectl create namespace "$ns"
start capture-record "$BIN/readyspan" record "$out/recording" -n "$ns" --kubeconfig "$KUBECONFIG_FILE"
sleep 3

pod() { # name image [extra container fields, indented]
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $ns, labels: {app: $1}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $2
    imagePullPolicy: IfNotPresent
${3:-    command: [sh, -c, exec sleep 3600]}
---
YAML
}
{
  pod cold "$REGISTRY/$COLD_REPO:$ns"
  pod warm "$BUSYBOX_IMAGE"
  pod missing "$REGISTRY/readyspan/does-not-exist:v1" "    command: [sleep, '3600']"
  pod probes "$BUSYBOX_IMAGE" "    command: [sh, -c, 'sleep 2; touch /dev/shm/started; sleep 2; touch /dev/shm/ready; exec sleep 3600']
    startupProbe: {exec: {command: [test, -f, /dev/shm/started]}, periodSeconds: 1, failureThreshold: 30}
    readinessProbe: {exec: {command: [test, -f, /dev/shm/ready]}, periodSeconds: 1}"
} | kubectl apply -f -
kubectl wait -n "$ns" --for condition=Ready pod/cold pod/warm pod/probes --timeout 120s
# The missing image: its first pull fails (ErrImagePull), the next waits (ImagePullBackOff).
for _ in $(seq 60); do
  reason=$(kubectl get pod missing -n "$ns" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}')
  [ "$reason" = ImagePullBackOff ] && break
  sleep 1
done
[ "$reason" = ImagePullBackOff ] || { echo "error: the missing image never reached ImagePullBackOff ($reason)" >&2; exit 1; }
# The kubelet exports its spans in batches (5 s); Jaeger's pipeline batches again.
sleep 15
# List snapshots beside the watch streams: a second view of the same objects, which the evidence
# tests read (readyspan reads the watch streams when both are there).
kubectl get pods -n "$ns" -o json >"$out/recording/pods.json"
kubectl get events -n "$ns" -o json >"$out/recording/events.core.v1.json"
kubectl get events.v1.events.k8s.io -n "$ns" -o json >"$out/recording/events.events.k8s.io.v1.json"
stop capture-record 10
mv "$out"/recording/* "$out"/ && rmdir "$out/recording"

kubectl get node "$NODE_NAME" -o jsonpath='{.status.nodeInfo}' | jq -S '{kubeletVersion, containerRuntimeVersion, kernelVersion, osImage}' >"$out/node-info.json"
: >"$out/kubelet-cri-spans.jsonl"
for name in cold warm missing probes; do
  uid=$(kubectl get pod "$name" -n "$ns" -o jsonpath='{.metadata.uid}')
  # The kubelet's traces of this Pod: each syncPod (tagged with the Pod's UID) is the root of its
  # own trace, its CRI calls beneath it. readyspan's own trace of the Pod (its ID is the UID)
  # carries the tag too, and containerd's server spans continue the kubelet's traces under the same
  # names: only the kubelet's spans are kept.
  tags=$(jq -rn --arg uid "$uid" '{"k8s.pod.uid": $uid} | tojson | @uri')
  curl -sf "http://$JAEGER_QUERY/api/traces?service=kubelet&limit=200&lookback=1h&tags=$tags" |
    jq -c --arg pod "$name" --arg self "${uid//-/}" '
      .data[] | select((.traceID | ltrimstr("0")) != ($self | ltrimstr("0"))) | .processes as $p | .spans[]
      | select($p[.processID].serviceName == "kubelet" and (.operationName | startswith("runtime.v1.")))
      | {pod: $pod, name: .operationName, start_us: .startTime, end_us: (.startTime + .duration)}' |
    jq -sc 'unique | sort_by(.start_us)[]' >>"$out/kubelet-cri-spans.jsonl"
done
kubectl delete namespace "$ns" --wait=false
echo "captured: kubelet $(jq -r .kubeletVersion "$out/node-info.json"), runtime $(jq -r .containerRuntimeVersion "$out/node-info.json"): $(wc -l <"$out/kubelet-cri-spans.jsonl") CRI spans, recording in $out"
