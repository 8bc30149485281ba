#!/usr/bin/env bash
# Builds readyspan for each GOOS/GOARCH given and packs readyspan_<VERSION>_<os>_<arch>.tar.gz
# (the binary, LICENSE, README.md) into OUT, with OUT/SHA256SUMS. `make dist` runs it:
#
#   VERSION=v0.1.0 LDFLAGS='-s -w ...' deploy/dist/archive.sh bin/dist linux/amd64 darwin/arm64 ...
#
# The archives are reproducible: the same tree, Go toolchain and gzip give the same bytes whenever
# and wherever they are built, so anyone can check a release's SHA256SUMS. Go builds are so with
# -trimpath; the tar stream by a fixed entry order, mtime (the last commit's), owner and mode; the
# gzip stream by leaving the file name and time out of its header (-n).
set -euo pipefail

out=${1:?usage: archive.sh OUT GOOS/GOARCH...}
shift
: "${VERSION:?VERSION must be set}" "${LDFLAGS:?LDFLAGS must be set}"
GO=${GO:-go}
cd "$(dirname "$0")/../.."

# --sort and --owner are GNU tar's; bsdtar (macOS) has neither.
if ! tar --version 2>/dev/null | grep -q 'GNU tar'; then
	echo "archive.sh: GNU tar is needed for reproducible archives" >&2
	exit 1
fi
mtime=$(git log -1 --format=%ct)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
rm -rf "$out"
mkdir -p "$out"
for platform in "$@"; do
	goos=${platform%/*} goarch=${platform#*/}
	name=readyspan_${VERSION}_${goos}_${goarch}
	mkdir "$stage/$name"
	CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch "$GO" build -trimpath -ldflags "$LDFLAGS" \
		-o "$stage/$name/readyspan" ./cmd/readyspan
	cp LICENSE README.md "$stage/$name/"
	# Entries named in sorted order, at the top level: krew's files[].from and a plain
	# `tar -xzf` both find readyspan and LICENSE where the archive is unpacked. The mode is
	# normalised so the archive does not depend on the umask of the checkout.
	tar --create --format=gnu --sort=name --mtime="@$mtime" \
		--owner=0 --group=0 --numeric-owner --mode='u=rwX,go=rX' \
		-C "$stage/$name" LICENSE README.md readyspan |
		gzip -n -9 >"$out/$name.tar.gz"
done
(cd "$out" && sha256sum -- *.tar.gz >SHA256SUMS)
