#!/usr/bin/env bash
# Builds the ctibridge Debian package from this checkout:
#
#   packaging/build-deb.sh            # -> dist/ctibridge_<version>_<arch>.deb
#   VERSION=1.2.0 ARCH=arm64 packaging/build-deb.sh
#
# The binary is static (CGO_ENABLED=0), built with -trimpath; file times in
# the package are the last commit's time (SOURCE_DATE_EPOCH), so the same
# commit gives the same package. nfpm (v2.45.2) is installed with `go
# install` into .cache/bin the first time. Prints the package's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

NFPM_VERSION=v2.45.2
ARCH=${ARCH:-$(go env GOARCH)}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
fi
if [ -z "${VERSION:-}" ]; then
  # Debian versions must start with a digit; ~ sorts before a release.
  VERSION="0.1.0~git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S).$(git rev-parse --short=10 HEAD 2>/dev/null || echo unknown)"
fi
export ARCH VERSION SOURCE_DATE_EPOCH

nfpm=$PWD/.cache/bin/nfpm
if ! [ -x "$nfpm" ] || ! go version -m "$nfpm" 2>/dev/null | grep -q "nfpm/v2[[:space:]]*$NFPM_VERSION"; then
  echo "== installing nfpm $NFPM_VERSION" >&2
  GOBIN=$PWD/.cache/bin GOFLAGS= go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION"
fi

echo "== go build ctibridge $VERSION ($ARCH)" >&2
mkdir -p dist
CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH go build -trimpath -buildvcs=false \
  -ldflags "-s -w -buildid= -X main.version=$VERSION" -o dist/ctibridge ./cmd/ctibridge

echo "== nfpm package deb" >&2
deb="dist/ctibridge_${VERSION}_${ARCH}.deb"
rm -f "$deb"
"$nfpm" package --config packaging/nfpm.yaml --packager deb --target "$deb" >&2
echo "$deb"
