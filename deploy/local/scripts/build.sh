#!/usr/bin/env bash
# Builds every binary the local cluster needs into bin/, from pinned Go modules, and installs the
# Debian packages the node needs (runc, CNI plugins, iptables, ...) when they are missing.
# A binary is rebuilt only when its stamp (bin/.stamps/NAME) does not match the pinned version,
# so re-running is cheap. Usage: build.sh [NAME...]   (default: all)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
# go.mod's toolchain (see lib.sh): the stamps below name the Go version, so it must not vary.
GOTOOLCHAIN=$(awk '/^toolchain /{print $2}' "$root/go.mod")
export GOTOOLCHAIN
if [ "${SKIP_PACKAGES:-0}" != 1 ]; then
  (source "$root/deploy/local/scripts/lib.sh" && ensure_packages)
fi
local_dir=$root/deploy/local
bin=$root/bin
mkdir -p "$bin/.stamps"

k8s_version=v1.37.2
k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

# The ldflags that stamp a Kubernetes component with its release, as the upstream build does
# (the kubelet reports it in Node.status.nodeInfo.kubeletVersion).
k8s_ldflags_for() {
  local v=$1 minor
  minor=$(echo "$v" | cut -d. -f2)
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$v"
}

# name | module dir (relative to deploy/local) | package | version stamp | extra env
components=(
  "etcd|tools/etcd|go.etcd.io/etcd/server/v3|v3.6.16|"
  "kubelet|.|k8s.io/kubernetes/cmd/kubelet|$k8s_version|"
  "kube-apiserver|.|k8s.io/kubernetes/cmd/kube-apiserver|$k8s_version|"
  "kube-controller-manager|.|k8s.io/kubernetes/cmd/kube-controller-manager|$k8s_version|"
  "kube-scheduler|.|k8s.io/kubernetes/cmd/kube-scheduler|$k8s_version|"
  "kube-proxy|.|k8s.io/kubernetes/cmd/kube-proxy|$k8s_version|"
  "kubectl|.|k8s.io/kubernetes/cmd/kubectl|$k8s_version|"
  "containerd|tools/containerd|github.com/containerd/containerd/v2/cmd/containerd|v2.4.2|tags"
  "containerd-shim-runc-v2|tools/containerd|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2|v2.4.2|tags"
  "localregistry|tools/registry|./cmd/localregistry|src|"
  "pause|tools/registry|./cmd/pause|src|"
  "localwebhook|tools/webhook|.|src|"
  "prometheus|tools/prometheus|github.com/prometheus/prometheus/cmd/prometheus|v0.316.0|"
  "promtool|tools/prometheus|github.com/prometheus/prometheus/cmd/promtool|v0.316.0|"
  "jaeger|tools/jaeger|github.com/jaegertracing/jaeger/cmd/jaeger|v1.76.0|"
  "kwok|tools/kwok|sigs.k8s.io/kwok/cmd/kwok|v0.8.0|"
  "helm|tools/helm|helm.sh/helm/v4/cmd/helm|v4.3.2|"
  # Karpenter with its KWOK provider (scripts/karpenter.sh): upstream's binary is "kwok", a name
  # bin/ already uses for kwok itself.
  "karpenter|tools/karpenter|sigs.k8s.io/karpenter/kwok|v1.15.0|"
)

# Built only when named (build.sh kubelet-1.34): older kubelets for the version matrix
# (make e2e KUBELET_VERSION=1.34, docs/kubelet-versions.md). Each is its own module pinned to
# that release's k8s.io/kubernetes and staging modules; up.sh runs bin/kubelet-$KUBELET_VERSION.
on_demand=(
  "kubelet-1.34|tools/kubelet-1.34|k8s.io/kubernetes/cmd/kubelet|v1.34.4|k8s"
  "kubelet-1.35|tools/kubelet-1.35|k8s.io/kubernetes/cmd/kubelet|v1.35.4|k8s"
  "kubelet-1.36|tools/kubelet-1.36|k8s.io/kubernetes/cmd/kubelet|v1.36.3|k8s"
  "containerd-1.7|tools/containerd-1.7|github.com/containerd/containerd/cmd/containerd|v1.7.35|tags"
  "containerd-shim-runc-v2-1.7|tools/containerd-1.7|github.com/containerd/containerd/cmd/containerd-shim-runc-v2|v1.7.35|tags"
  # Argo Rollouts' controller, for capture-rollout.sh (make argo-rollouts): ~12 min cold, so never
  # part of the default build. Named as upstream names it: its field manager is the binary's name.
  "rollouts-controller|tools/argo-rollouts|github.com/argoproj/argo-rollouts/cmd/rollouts-controller|v1.10.2|"
  # kube-network-policies, a NetworkPolicy implementation (nftables + nfqueue) run on the host by
  # scripts/network-policies.sh (make network-policies): never part of the default build.
  "kube-network-policies|tools/network-policies|sigs.k8s.io/kube-network-policies/cmd|v0.8.0|"
)
for w in "$@"; do
  known=0
  for entry in "${components[@]}"; do [ "$w" = "${entry%%|*}" ] && known=1; done
  for entry in "${on_demand[@]}"; do
    [ "$w" = "${entry%%|*}" ] && { components+=("$entry"); known=1; }
  done
  [ "$known" = 1 ] || { echo "build: unknown component $w" >&2; exit 1; }
done

want=("$@")
selected() {
  [ ${#want[@]} -eq 0 ] && return 0
  local w; for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1
}

# For locally written tools the stamp is a hash of their sources, so edits trigger a rebuild.
stamp_of() {
  local dir=$1 version=$2
  if [ "$version" = src ]; then
    (cd "$local_dir/$dir" && find . -name '*.go' -o -name go.mod -o -name go.sum | sort | xargs cat | sha256sum | cut -c1-16)
  else
    echo "$version $(go env GOVERSION)"
  fi
}

total_start=$(date +%s)
for entry in "${components[@]}"; do
  IFS='|' read -r name dir pkg version extra <<<"$entry"
  selected "$name" || continue
  stamp=$(stamp_of "$dir" "$version")
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.stamps/$name" 2>/dev/null)" = "$stamp" ]; then
    echo "build: $name $version up to date"
    continue
  fi
  echo "build: $name $version ..."
  start=$(date +%s)
  flags=(-trimpath)
  case "$dir" in
    .) flags+=(-ldflags "$k8s_ldflags") ;;
    # helm reports its version from a variable its release builds set.
    tools/helm) flags+=(-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version") ;;
    # argo-rollouts reports its version (--version, its start-up log) from variables its Makefile sets.
    tools/argo-rollouts) flags+=(-ldflags "-s -w -X github.com/argoproj/argo-rollouts/utils/version.version=${version#v} -X github.com/argoproj/argo-rollouts/utils/version.gitTreeState=clean") ;;
    # Karpenter reports its version (the karpenter/VERSION user agent, karpenter_build_info) from
    # a variable its release builds set.
    tools/karpenter) flags+=(-ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$version") ;;
    *) if [ "$extra" = k8s ]; then flags+=(-ldflags "$(k8s_ldflags_for "$version")"); else flags+=(-ldflags "-s -w"); fi ;;
  esac
  [ "$extra" = tags ] && flags+=(-tags "no_btrfs,no_devmapper,no_zfs")
  if ! (cd "$local_dir/$dir" && CGO_ENABLED=0 nice -n 10 go build "${flags[@]}" -o "$bin/$name.tmp" "$pkg"); then
    echo "build: $name FAILED" >&2
    exit 1
  fi
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$stamp" > "$bin/.stamps/$name"
  echo "build: $name done in $(( $(date +%s) - start ))s"
done
echo "build: all done in $(( $(date +%s) - total_start ))s"
