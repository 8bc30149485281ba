#!/usr/bin/env bash
# Captures two recordings of one setup on the local cluster (the cluster must be up: make
# cluster-up), for readyspan compare's TestSameSetup (compare/source/testdata): each is readyspan's
# recording of a new namespace in which a Deployment of 15 busybox httpd Pods (an init container
# writing the page, a readiness probe, the image already on the node) is created and rolls out to
# Ready. A third run comes first and is not recorded, so that neither recording holds the node's
# first Pods after cluster-up (the first sandboxes, the kubelet's first syncs), which start slower.
#
#   capture-same-setup.sh OUTDIR     writes OUTDIR/same-setup-1 and OUTDIR/same-setup-2
source "$(dirname "$0")/lib.sh"

out=${1:?usage: capture-same-setup.sh OUTDIR}
ns=${CAPTURE_NS:-compare-same}
replicas=${CAPTURE_REPLICAS:-15}
[ -x "$BIN/readyspan" ] || { echo "error: bin/readyspan is not built (make build)" >&2; exit 1; }
running kube-apiserver || { echo "error: the local cluster is not up (make cluster-up)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

cleanup() { stop capture-record 10; }
trap cleanup EXIT

deployment() {
  kubectl -n "$ns" apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: $replicas
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      initContainers:
        - name: write-page
          image: $BUSYBOX_IMAGE
          imagePullPolicy: IfNotPresent
          command: [sh, -c, 'echo "hello from \$(hostname)" > /www/index.html']
          volumeMounts: [{name: www, mountPath: /www}]
      containers:
        - name: httpd
          image: $BUSYBOX_IMAGE
          imagePullPolicy: IfNotPresent
          command: [httpd, -f, -p, "8080", -h, /www]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe:
            httpGet: {path: /, port: http}
            initialDelaySeconds: 1
            periodSeconds: 1
          volumeMounts: [{name: www, mountPath: /www}]
      volumes: [{name: www, emptyDir: {}}]
YAML
}

# run [DIR]: the Deployment in a new namespace until it is Ready, recorded into DIR when given.
run() {
  kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s
  kubectl create namespace "$ns"
  if [ -n "${1:-}" ]; then
    rm -rf "$1"
    start capture-record "$BIN/readyspan" record "$1" -n "$ns" --kubeconfig "$KUBECONFIG_FILE"
    sleep 3 # the recording's informers synced before the first object
  fi
  deployment
  kubectl -n "$ns" rollout status deployment/web --timeout=180s
  if [ -n "${1:-}" ]; then
    sleep 5 # the last Pods' Events and EndpointSlice writes
    stop capture-record 10
  fi
}

run
run "$out/same-setup-1"
run "$out/same-setup-2"
kubectl delete namespace "$ns" --wait=true --timeout=120s
echo "recordings: $out/same-setup-1 $out/same-setup-2"
