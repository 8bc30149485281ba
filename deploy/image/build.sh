#!/usr/bin/env bash
# Builds readyspan's container image without Docker (make image, after make build) and pushes it.
#
#   deploy/image/build.sh                 # push to $IMAGE (default: the local cluster's registry)
#   deploy/image/build.sh --tar FILE      # write an OCI image layout tarball instead of pushing
#
# Environment: IMAGE (default 127.0.0.1:5000/readyspan/readyspan:dev), BINARY (default bin/readyspan),
# CA_BUNDLE (default the host's /etc/ssl/certs/ca-certificates.crt, from Debian's ca-certificates),
# VERSION (default git describe), SOURCE_DATE_EPOCH (default the last commit's time, so a rebuild
# of the same commit and binary gives the same digest). Extra arguments go to the builder
# (deploy/image/main.go; --help lists them). The Dockerfile builds the same layout with Docker.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

image=${IMAGE:-127.0.0.1:5000/readyspan/readyspan:dev}
binary=${BINARY:-$root/bin/readyspan}
ca_bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}

if [ ! -x "$binary" ]; then
  echo "image: $binary is missing; run make build first" >&2
  exit 1
fi
if [ ! -r "$ca_bundle" ]; then
  echo "image: no CA bundle at $ca_bundle; apt-get install ca-certificates, or set CA_BUNDLE" >&2
  exit 1
fi

# Build the builder into bin/ (cached by go), then run it from the caller's directory so relative
# paths in the arguments (--tar FILE) mean what the caller meant.
go build -C "$root/deploy/image" -o "$root/bin/readyspan-image" .
exec "$root/bin/readyspan-image" \
  --binary "$binary" \
  --ca-bundle "$ca_bundle" \
  --image "$image" \
  --version "$version" \
  --source-date-epoch "$epoch" \
  "$@"
