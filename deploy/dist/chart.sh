#!/usr/bin/env bash
# Packages the Helm chart deploy/helm/readyspan at the release: chart version VERSION without its
# leading v, appVersion VERSION (the image tag the chart runs by default), into OUT, with
# OUT/chart-SHA256SUMS. `make dist` runs it after the archives:
#
#   VERSION=v0.1.0 HELM=bin/helm deploy/dist/chart.sh bin/dist
#
# The package is reproducible: the chart is staged with its symbolic links resolved (files/ links
# to the rules, the dashboard and the ClusterRole kept elsewhere in the repository) and every file
# dated at the last commit, and helm writes a gzip header without a time.
set -euo pipefail

out=${1:?usage: chart.sh OUT}
: "${VERSION:?VERSION must be set}" "${HELM:?HELM must be set (bin/helm)}"
cd "$(dirname "$0")/../.."
case $VERSION in
v[0-9]*) ;;
*) echo "chart.sh: VERSION $VERSION is not v<semver>" >&2; exit 1 ;;
esac
mtime=$(git log -1 --format=%ct)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -RL deploy/helm/readyspan "$stage/readyspan"
find "$stage/readyspan" -exec touch -h -d "@$mtime" {} +
mkdir -p "$out"
HELM_CONFIG_HOME=$stage/home HELM_CACHE_HOME=$stage/home HELM_DATA_HOME=$stage/home \
	"$HELM" lint --strict "$stage/readyspan" >/dev/null
HELM_CONFIG_HOME=$stage/home HELM_CACHE_HOME=$stage/home HELM_DATA_HOME=$stage/home \
	"$HELM" package "$stage/readyspan" --version "${VERSION#v}" --app-version "$VERSION" -d "$out" >/dev/null
(cd "$out" && sha256sum -- "readyspan-${VERSION#v}.tgz" >chart-SHA256SUMS)
