#!/usr/bin/env bash
# Builds the Go vulnerability database into bin/vulndb for govulncheck, from the pinned
# golang.org/x/vulndb module (the source of vuln.go.dev), fetched through the Go module proxy:
# govulncheck's default, vuln.go.dev, is out of reach where only the module proxy is.
# gendb reads the OSV entries from a git repository (their commit dates become the entries'
# modified times), so the module's files are committed once into a scratch repository first.
# Rebuilt only when the pinned version changes. Usage: vulndb.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
GOTOOLCHAIN=$(awk '/^toolchain /{print $2}' "$root/go.mod")
export GOTOOLCHAIN
version=v0.0.0-20261105234957-e22db6528018
out=$root/bin/vulndb
stamp=$root/bin/.stamps/vulndb
if [ -f "$out/index/db.json" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "vulndb: $version up to date"
  exit 0
fi
src=$(go mod download -json "golang.org/x/vulndb@$version" | awk -F'"' '/"Dir":/{print $4}')
[ -d "$src/data/osv" ] || { echo "vulndb: golang.org/x/vulndb@$version has no data/osv" >&2; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src" "$work/repo" && chmod -R u+w "$work/repo"
(
  cd "$work/repo"
  git init -q && git add -A
  GIT_AUTHOR_DATE=2026-11-05T23:49:57Z GIT_COMMITTER_DATE=2026-11-05T23:49:57Z \
    git -c user.name=readyspan -c user.email=readyspan@localhost commit -qm "golang.org/x/vulndb@$version"
  go build -o "$work/gendb" ./cmd/gendb
)
rm -rf "$out.tmp" && "$work/gendb" -repo "$work/repo" -out "$out.tmp"
rm -rf "$out" && mv "$out.tmp" "$out"
mkdir -p "$(dirname "$stamp")" && echo "$version" >"$stamp"
echo "vulndb: $(find "$out/ID" -name '*.json' | wc -l) entries in ${out#"$root"/}"
