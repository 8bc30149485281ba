#!/usr/bin/env bash
# Captures an Argo Rollouts Rollout on the local cluster (the cluster must be up: make cluster-up):
# readyspan's recording of a namespace in which Argo Rollouts' own controller (v1.10.2, built on
# demand into bin/rollouts-controller, run on the host with the admin kubeconfig) rolls out a
# Rollout of three busybox httpd Pods with a readiness probe and a Service, then rolls it again
# after a change of its Pod template (an env var), through a canary of four steps: setWeight 34,
# pause 5s, setWeight 67, pause 5s. The Rollout's ReplicaSets carry it as their controller owner
# (argoproj.io/v1alpha1 Rollout); the controller writes core/v1 Events (source rollouts-controller:
# NewReplicaSetCreated, ScalingReplicaSet "Scaled up ReplicaSet NAME (revision N) from A to B", ...).
# Evidence beside the recording: rollouts.watch.json, the Rollout's watch stream as kubectl served
# it (every status the controller wrote), and List snapshots at the end (rollouts.json,
# replicasets.json, pods.json, events.core.v1.json, events.events.k8s.io.v1.json).
#
#   capture-rollout.sh OUTDIR
source "$(dirname "$0")/lib.sh"

out=${1:?usage: capture-rollout.sh OUTDIR}
ns=${CAPTURE_NS:-argo-rollout}
[ -x "$BIN/readyspan" ] || { echo "error: bin/readyspan is not built (make build)" >&2; exit 1; }
running kube-apiserver || { echo "error: the local cluster is not up (make cluster-up)" >&2; exit 1; }
running rollouts-controller && { echo "error: a rollouts-controller is running already (pid $(pid_of rollouts-controller))" >&2; exit 1; }
# The controller logs a port it cannot bind and runs on: a second controller would go unnoticed
# (its health check answered by the first), and both would reconcile the Rollout.
for port in "$ROLLOUTS_METRICS_PORT" "$ROLLOUTS_HEALTHZ_PORT"; do
  if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "error: 127.0.0.1:$port is taken (another rollouts-controller?)" >&2
    exit 1
  fi
done
SKIP_PACKAGES=1 "$LOCAL/scripts/build.sh" rollouts-controller
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/recording" "$out"/*.json

cleanup() {
  stop capture-record 10
  stop capture-rollouts-watch 5
  stop rollouts-controller 10
}
trap cleanup EXIT

# The CRDs from the module cache (five, ~3 MB: the controller's informers need each of them);
# server-side, since a Rollout's CRD is too large for client-side apply's annotation.
crds=$(cd "$LOCAL/tools/argo-rollouts" && go list -m -f '{{.Dir}}' github.com/argoproj/argo-rollouts)/manifests/crds
kubectl apply --server-side --force-conflicts -k "$crds"
crd_names=(crd/rollouts.argoproj.io crd/experiments.argoproj.io crd/analysisruns.argoproj.io
  crd/analysistemplates.argoproj.io crd/clusteranalysistemplates.argoproj.io)
# kubectl wait fails at once on a CRD that has no conditions yet (just created): retry.
for _ in $(seq 40); do kubectl wait --for condition=Established --timeout 30s "${crd_names[@]}" >/dev/null 2>&1 && break; sleep 0.5; done
kubectl wait --for condition=Established --timeout 30s "${crd_names[@]}"

# Every namespace, as in its own Deployment; no leader election (no Lease, no argo-rollouts
# namespace needed); the config map argo-rollouts-config is optional and left out.
start rollouts-controller "$BIN/rollouts-controller" --kubeconfig "$KUBECONFIG_FILE" --leader-elect=false \
  --metricsPort "$ROLLOUTS_METRICS_PORT" --healthzPort "$ROLLOUTS_HEALTHZ_PORT"
wait_for rollouts-controller 60 curl -sf "http://127.0.0.1:$ROLLOUTS_HEALTHZ_PORT/healthz"

kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=60s
kubectl create namespace "$ns"
start capture-record "$BIN/readyspan" record "$out/recording" -n "$ns" --kubeconfig "$KUBECONFIG_FILE"
# shellcheck disable=SC2016 # expanded by the inner bash: $0 the file, $@ the command
start capture-rollouts-watch bash -c 'exec "$@" >"$0"' "$out/rollouts.watch.json" \
  "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" get rollouts.argoproj.io -n "$ns" \
  --watch --output-watch-events --show-managed-fields -o json
sleep 3

kubectl apply -f - <<YAML
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, namespace: $ns, labels: {app: web}}
spec:
  replicas: 3
  revisionHistoryLimit: 3
  selector:
    matchLabels: {app: web}
  strategy:
    canary:
      steps:
        - setWeight: 34
        - pause: {duration: 5s}
        - setWeight: 67
        - pause: {duration: 5s}
  template:
    metadata:
      labels: {app: web}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 2
      initContainers:
        - name: write-page
          image: $BUSYBOX_IMAGE
          imagePullPolicy: IfNotPresent
          command: [sh, -c, 'echo "hello from \$(hostname)" > /www/index.html']
          volumeMounts:
            - {name: www, mountPath: /www}
      containers:
        - name: httpd
          image: $BUSYBOX_IMAGE
          imagePullPolicy: IfNotPresent
          command: [httpd, -f, -p, "8080", -h, /www]
          ports:
            - {name: http, containerPort: 8080}
          readinessProbe:
            httpGet: {path: /, port: http}
            initialDelaySeconds: 1
            periodSeconds: 1
          volumeMounts:
            - {name: www, mountPath: /www}
      volumes:
        - name: www
          emptyDir: {}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $ns}
spec:
  selector: {app: web}
  ports:
    - {name: http, port: 80, targetPort: http}
YAML

# rollout_done: the controller has seen the latest spec (its observedGeneration is a string), the
# Rollout is Healthy on that template's ReplicaSet, and only its three Pods are left.
rollout_done() {
  local s gen observed phase current stable available replicas
  s=$(kubectl get rollout web -n "$ns" -o json | jq -r '[.metadata.generation | tostring] + ([.status.observedGeneration,
    .status.phase, .status.currentPodHash, .status.stableRS, .status.availableReplicas, .status.replicas] | map(tostring)) | join(" ")')
  read -r gen observed phase current stable available replicas <<<"$s"
  [ "$gen" = "$observed" ] && [ "$phase" = Healthy ] && [ "$current" = "$stable" ] &&
    [ "$available" = 3 ] && [ "$replicas" = 3 ] &&
    [ "$(kubectl get pods -n "$ns" -o name | wc -l)" = 3 ]
}
wait_rollout() { # what
  local deadline=$(($(date +%s) + 180))
  until rollout_done; do
    running rollouts-controller || die rollouts-controller "exited during the $1"
    [ "$(date +%s)" -lt "$deadline" ] || { kubectl get rollout web -n "$ns" -o yaml >&2; die rollouts-controller "the $1 did not finish in 180s"; }
    sleep 1
  done
}
wait_rollout "first rollout"
sleep 2
# A change of the Pod template: a new ReplicaSet, through the canary's four steps.
kubectl patch rollout web -n "$ns" --type json \
  -p '[{"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [{"name": "REVISION", "value": "2"}]}]'
wait_rollout "second rollout"
# The last Events (the old ReplicaSet's scale-down) and watch events reach the recording.
sleep 3

kubectl get rollouts.argoproj.io -n "$ns" -o json --show-managed-fields >"$out/rollouts.json"
kubectl get replicasets -n "$ns" -o json --show-managed-fields >"$out/replicasets.json"
kubectl get pods -n "$ns" -o json >"$out/pods.json"
kubectl get events -n "$ns" -o json >"$out/events.core.v1.json"
kubectl get events.v1.events.k8s.io -n "$ns" -o json >"$out/events.events.k8s.io.v1.json"
cleanup
trap - EXIT
kubectl delete namespace "$ns" --wait=false
echo "captured: $(jq '.items | length' "$out/replicasets.json") ReplicaSets, $(jq -s length "$out/rollouts.watch.json") Rollout watch events," \
  "$(jq '[.items[] | select(.source.component == "rollouts-controller")] | length' "$out/events.core.v1.json") controller Events; recording in $out/recording"
