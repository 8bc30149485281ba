#!/usr/bin/env bash
# Captures the components' own spans (kube-apiserver, kubelet, containerd) for one run on the local
# cluster, with readyspan's recording and the audit log of the same run: the testdata readyspan's
# OTLP input is tested on (otlpin/testdata/README.md). The cluster must be up (make cluster-up);
# Jaeger forwards the components' spans to 127.0.0.1:$READYSPAN_OTLP_PORT, where test/e2e/otlpraw
# keeps them as received, so readyspan must not listen there meanwhile.
#
#   capture-components.sh OUTDIR [REPLICAS] [BARE]
source "$(dirname "$0")/lib.sh"

out=${1:?usage: capture-components.sh OUTDIR [REPLICAS] [BARE]}
replicas=${2:-5}
bare=${3:-2}
ns=${CAPTURE_NS:-capture-components}
mkdir -p "$out"
out=$(cd "$out" && pwd)
(cd "$ROOT" && go build -o "$BIN/otlpraw" ./test/e2e/otlpraw)
stop otlpraw 5 >/dev/null 2>&1 || true
: >"$out/components.otlp"
rm -f "$out/components.otlp.gz"
start otlpraw "$BIN/otlpraw" --listen "127.0.0.1:$READYSPAN_OTLP_PORT" --out "$out/components.otlp"
wait_for otlpraw 10 bash -c "echo >/dev/tcp/127.0.0.1/$READYSPAN_OTLP_PORT"
kubectl create namespace "$ns"
rm -rf "$out/recording"
start capture-record "$BIN/readyspan" record "$out/recording" -n "$ns" --kubeconfig "$KUBECONFIG_FILE"
sleep 3
audit_from=$(wc -l <"$LOGS/audit.log")

# A Deployment (the ReplicaSet controller creates its Pods; the image pulled anew for each) and
# bare Pods created by the user, each by its own client.
kubectl apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $ns}
spec:
  replicas: $replicas
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: $BUSYBOX_IMAGE
        imagePullPolicy: Always
        command: [sleep, "3600"]
YAML
clients=()
for i in $(seq 1 "$bare"); do
  kubectl run "bare-$i" -n "$ns" --image "$BUSYBOX_IMAGE" --restart Never --command -- sleep 3600 &
  clients+=($!)
done
wait "${clients[@]}"
kubectl wait -n "$ns" --for condition=Ready pod --all --timeout 120s
# The kubelet and the apiserver export in batches (5 s), Jaeger's pipeline batches again.
sleep 15
stop capture-record 10
stop otlpraw 5
tail -n +"$((audit_from + 1))" "$LOGS/audit.log" | grep -F "\"namespace\":\"$ns\"" >"$out/recording/audit.jsonl" || true
kubectl delete namespace "$ns" --wait=false
gzip -9f "$out/components.otlp"
echo "captured: $(wc -c <"$out/components.otlp.gz") bytes of OTLP (gzip), $(wc -l <"$out/recording/audit.jsonl") audit events, recording in $out/recording"
