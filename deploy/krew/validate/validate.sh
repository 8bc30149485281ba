#!/usr/bin/env bash
# Checks a krew plugin manifest with krew's own code, as krew-index does before accepting it:
#
#   deploy/krew/validate/validate.sh MANIFEST DIST BIN
#
# MANIFEST is the rendered manifest, DIST the directory holding its archives, BIN the directory
# holding validate-krew-manifest and krew (built from this module by `make dist`).
#
# validate-krew-manifest checks the structure (name, semver, selectors, no platform matched twice).
# Its install check runs `kubectl krew install --manifest` and so downloads each platform's URI,
# which does not exist until the release is published: it is skipped (-skip-install), and the same
# install is done here with `krew install --manifest --archive`, from the local archive of each
# platform. krew verifies the archive against the manifest's sha256, unpacks it, moves the files
# and links the binary; then, as validate-krew-manifest would, the LICENSE must be installed.
set -euo pipefail

manifest=${1:?usage: validate.sh MANIFEST DIST BIN}
dist=${2:?usage: validate.sh MANIFEST DIST BIN}
bin=${3:?usage: validate.sh MANIFEST DIST BIN}

"$bin/validate-krew-manifest" -manifest "$manifest" -skip-install

roots=$(mktemp -d)
trap 'rm -rf "$roots"' EXIT
hostos=$(${GO:-go} env GOOS) hostarch=$(${GO:-go} env GOARCH)
for archive in "$dist"/*.tar.gz; do
	name=$(basename "$archive" .tar.gz) # readyspan_<version>_<os>_<arch>
	goarch=${name##*_}
	rest=${name%_*}
	goos=${rest##*_}
	root=$roots/$goos-$goarch
	# KREW_OS/KREW_ARCH make krew pick that platform's entry; no upgrade check, no network.
	KREW_ROOT=$root KREW_OS=$goos KREW_ARCH=$goarch KREW_NO_UPGRADE_CHECK=1 PATH="$root/bin:$PATH" \
		"$bin/krew" install --manifest "$manifest" --archive "$archive" 2>"$root.log" ||
		{ cat "$root.log" >&2; echo "validate.sh: krew install failed for $goos/$goarch" >&2; exit 1; }
	if ! compgen -G "$root/store/readyspan/*/LICENSE" >/dev/null; then
		echo "validate.sh: krew installed no LICENSE for $goos/$goarch" >&2
		exit 1
	fi
	# The plugin as kubectl would run it: krew's link on the PATH, kubectl-readyspan.
	if [ "$goos/$goarch" = "$hostos/$hostarch" ]; then
		out=$("$root/bin/kubectl-readyspan" version)
		echo "validate.sh: $goos/$goarch: kubectl-readyspan version: $out"
	elif [ ! -L "$root/bin/kubectl-readyspan" ]; then
		echo "validate.sh: krew linked no kubectl-readyspan for $goos/$goarch" >&2
		exit 1
	fi
	echo "validate.sh: $goos/$goarch installs with krew"
done
