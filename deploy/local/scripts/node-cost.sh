#!/usr/bin/env bash
# Measures the node component (readyspan node) on the local cluster's node at SERVICES Services
# of ENDPOINTS endpoints each (default 100 × 10), in kube-proxy's current mode: its RSS, and its
# CPU over DURATION seconds (default 60) while one endpoint a second changes readiness, which
# makes kube-proxy rewrite its rules and the component read them again. The Services have no
# selector and their EndpointSlices are written here, as a user does for a selectorless Service:
# kube-proxy programs them like any other, and no Pod needs to run. Prints one line of figures;
# removes what it made.
#
#   node-cost.sh            (root; the cluster up, readyspan-node.sh started)
source "$(dirname "$0")/lib.sh"
SERVICES=${SERVICES:-100} ENDPOINTS=${ENDPOINTS:-10} DURATION=${DURATION:-60}
NS=node-cost
[ "$(id -u)" = 0 ] || { echo "error: reading the component's /proc needs root" >&2; exit 1; }
running readyspan-node || { echo "error: readyspan-node is not running (readyspan-node.sh start)" >&2; exit 1; }
pid=$(pid_of readyspan-node)
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
trap 'kc delete namespace "$NS" --wait=false >/dev/null 2>&1 || true' EXIT

kc delete namespace "$NS" --ignore-not-found --wait=true >/dev/null # a previous run's, still going
kc create namespace "$NS" >/dev/null
objects() {
  local s e
  for ((s = 0; s < SERVICES; s++)); do
    printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: svc-%d}\nspec:\n  ports: [{name: http, port: 80, targetPort: 8080}]\n' "$s"
    printf -- '---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-%d-1\n  labels: {kubernetes.io/service-name: svc-%d}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n' "$s" "$s"
    for ((e = 0; e < ENDPOINTS; e++)); do
      printf -- '  - addresses: ["10.201.%d.%d"]\n    conditions: {ready: true}\n' "$s" "$e"
    done
  done
}
objects | kc apply -n "$NS" -f - >/dev/null
want=$((SERVICES * ENDPOINTS))
metric() { curl -sf "http://$READYSPAN_NODE_METRICS/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
# Until the component's count has been still for 15 s: kube-proxy programs what it programs (its
# iptables mode's partial syncs have been seen to leave Services out until its next full sync).
deadline=$(( $(date +%s) + 300 )) seen=-1 still=0
while [ "$still" -lt 15 ]; do
  [ "$(date +%s)" -lt "$deadline" ] || { echo "error: the component's endpoint count did not settle (last $seen)" >&2; exit 1; }
  n=$(metric readyspan_node_endpoints | cut -d. -f1)
  if [ "$n" = "$seen" ] && [ "$n" -ge $((want / 2)) ]; then still=$((still + 1)); else still=0 seen=$n; fi
  sleep 1
done
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
hz=$(getconf CLK_TCK)
changes0=$(metric 'readyspan_node_changes_total{kind="endpoint.removed"}')
cpu0=$(cpu); t0=$(date +%s.%N); rss_max=0
for ((i = 0; i < DURATION; i++)); do
  s=$((RANDOM % SERVICES)) e=$((RANDOM % ENDPOINTS)) ready=$([ $((i % 2)) = 0 ] && echo false || echo true)
  kc patch endpointslice -n "$NS" "svc-$s-1" --type json \
    -p "[{\"op\":\"replace\",\"path\":\"/endpoints/$e/conditions/ready\",\"value\":$ready}]" >/dev/null
  r=$(rss); [ "$r" -gt "$rss_max" ] && rss_max=$r
  sleep 1
done
cpu1=$(cpu); t1=$(date +%s.%N)
changes1=$(metric 'readyspan_node_changes_total{kind="endpoint.removed"}')
awk -v c0="$cpu0" -v c1="$cpu1" -v t0="$t0" -v t1="$t1" -v hz="$hz" -v rss="$rss_max" -v n="$want" \
  -v mode="$(kube_proxy_mode)" -v ch0="${changes0:-0}" -v ch1="${changes1:-0}" -v seen="$seen" 'BEGIN {
  printf "node-cost: %s mode, %d endpoints made, %d in the rules: CPU %.2f%% of a core (%.2f CPU-s in %.0f s, one change a second; %d removals seen), RSS max %.1f MiB\n",
    mode, n, seen, 100 * (c1 - c0) / hz / (t1 - t0), (c1 - c0) / hz, t1 - t0, ch1 - ch0, rss / 1024 }'
